/**
 * What a client can make the server hold, and for how long: HEAD on the
 * event stream opens nothing, a stream whose reader falls behind is cut off
 * instead of buffered for, a stream ends when its token stops being accepted
 * (exp, or the isRevoked hook), one user holds at most maxStreamsPerUser
 * streams, and a body that arrives too slowly is refused with nothing
 * stored. Through `server.fetch`, and over real HTTP where the host's own
 * handling matters (@hono/node-server's HEAD, a socket that stalls).
 * Subscriptions are counted by a store wrapper, never by memory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createSyncServer, sqliteStore, type ServerStore, type SyncServer, type SyncServerOptions } from '../../src/server/index.js';
import { DEFAULT_SYNC_LIMITS, ErrorResponseSchema } from '../../src/sync/index.js';
import { SECRET, call, noteOp, sseReader, tokenFor, uniqueUser } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-bounds-'));
let n = 0;
const open: { store: ServerStore; server: SyncServer }[] = [];
afterEach(async () => {
  for (const { store, server } of open.splice(0)) {
    await server.close();
    await store.close();
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A SQLite store that counts subscriptions and the pokes it hands to them. */
function countingStore(): ServerStore & { subscribed: number; active: number; delivered: number } {
  const inner = sqliteStore(path.join(dir, `bounds-${++n}.db`));
  const counts = { subscribed: 0, active: 0, delivered: 0 };
  return Object.assign(counts, {
    ...inner,
    async subscribe(userId: string, onPoke: Parameters<ServerStore['subscribe']>[1]) {
      const off = await inner.subscribe(userId, (head, appended) => {
        counts.delivered++;
        onPoke(head, appended);
      });
      counts.subscribed++;
      counts.active++;
      return () => {
        counts.active--;
        off();
      };
    },
  });
}

function start(options: Partial<SyncServerOptions> = {}) {
  const store = countingStore();
  const server = createSyncServer({ store, auth: { secret: SECRET }, ...options });
  open.push({ store, server });
  return { store, server };
}

const events = (server: SyncServer, token: string, method = 'GET') =>
  server.fetch(new Request('http://t/v1/events', { method, headers: { authorization: `Bearer ${token}` } }));

async function expectError(response: Response, status: number, code: string): Promise<string> {
  expect(response.status).toBe(status);
  const body = ErrorResponseSchema.parse(await response.json());
  expect(body.error.code).toBe(code);
  return body.error.message;
}

const pushNote = (server: SyncServer, userId: string, token: string, seq: number) => call(server, '/v1/push', { clientId: 'c', items: [{ seq, op: noteOp(userId, 's', seq) }] }, token);

describe('HEAD /v1/events', () => {
  it('answers with the stream’s headers and subscribes to nothing, so pokes to that user queue nowhere', async () => {
    const { server, store } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    for (let i = 0; i < 100; i++) {
      const head = await events(server, token, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe('text/event-stream');
      expect(head.body).toBeNull();
    }
    expect((await events(server, 'not.a.jwt', 'HEAD')).status).toBe(401);
    for (let seq = 1; seq <= 150; seq++) expect((await pushNote(server, alice, token, seq)).status).toBe(200);
    expect(store.subscribed).toBe(0);
    expect(store.delivered).toBe(0);
    // The wrapper does count: a GET subscribes once and is poked.
    const stream = sseReader(await events(server, token));
    expect((await stream.next()).event).toBe('poke');
    await pushNote(server, alice, token, 151);
    expect((await stream.next()).event).toBe('poke');
    expect([store.subscribed, store.delivered]).toEqual([1, 1]);
    await stream.close();
    await expect.poll(() => store.active).toBe(0);
  });

  it('over HTTP too, where @hono/node-server hands HEAD to the GET handler and drops the body unread', async () => {
    const { server, store } = start();
    const token = await tokenFor(uniqueUser());
    const listening = await server.listen({ port: 0 });
    for (let i = 0; i < 20; i++) {
      const head = await fetch(`${listening.url}/v1/events`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe('text/event-stream');
    }
    expect(store.subscribed).toBe(0);
    // HEAD holds no stream: the user may still open all of theirs.
    const streams = await Promise.all(Array.from({ length: DEFAULT_SYNC_LIMITS.maxStreamsPerUser }, () => fetch(`${listening.url}/v1/events`, { headers: { authorization: `Bearer ${token}` } })));
    expect(streams.map((response) => response.status)).toEqual(streams.map(() => 200));
    for (const response of streams) await response.body?.cancel();
  });
});

describe('a reader that falls behind', () => {
  it('has its stream ended once more than maxStreamQueueBytes wait for it, while a reader that keeps up keeps its stream', async () => {
    const maxStreamQueueBytes = 4096;
    const { server, store } = start({ limits: { maxStreamQueueBytes } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const stalled = await events(server, token);
    const reading = sseReader(await events(server, token));
    expect((await reading.next()).event).toBe('poke');
    await expect.poll(() => store.active).toBe(2);
    // Each poke carries its note (a few hundred bytes): 40 of them are well over the limit.
    for (let seq = 1; seq <= 40; seq++) {
      await pushNote(server, alice, token, seq);
      expect((await reading.next()).event).toBe('poke');
    }
    await expect.poll(() => store.active).toBe(1);
    // The queue was dropped with the stream: its reader learns of the end at once.
    await expect(stalled.body!.getReader().read()).rejects.toMatchObject({ message: expect.stringContaining(`${maxStreamQueueBytes} bytes behind`) as string });
    await pushNote(server, alice, token, 41);
    expect((await reading.next()).event).toBe('poke');
    expect(store.active).toBe(1);
    await reading.close();
  });
});

describe('a stream ends when its token stops being accepted', () => {
  it('at the JWT’s exp (with the clock tolerance), after an `expired` event', async () => {
    const { server, store } = start();
    const alice = uniqueUser('alice');
    // exp one second ahead: the server accepts it 5 s past that (clock tolerance), then ends the stream.
    const token = await tokenFor(alice, { exp: Math.floor(Date.now() / 1000) + 1 });
    const stream = sseReader(await events(server, token));
    expect((await stream.next()).event).toBe('poke');
    expect(await stream.next()).toEqual({ event: 'expired', data: '{"reason":"expired"}' });
    await expect(stream.next()).rejects.toThrow('event stream ended');
    expect(store.active).toBe(0);
    // Pokes carry op content: a push after the end pokes no one, and the token gets nothing more.
    expect((await pushNote(server, alice, await tokenFor(alice), 1)).status).toBe(200);
    expect(store.delivered).toBe(0);
    await expectError(await events(server, token), 401, 'sync/unauthorized');
  });

  it('at the expiresAtMs a verify function returns; one already past is refused', async () => {
    const alice = uniqueUser('alice');
    const { server, store } = start({ auth: { verify: (token) => ({ userId: alice, expiresAtMs: Number(token) }) } });
    const stream = sseReader(await events(server, String(Date.now() + 1000)));
    expect((await stream.next()).event).toBe('poke');
    expect(await stream.next()).toEqual({ event: 'expired', data: '{"reason":"expired"}' });
    await expect(stream.next()).rejects.toThrow('event stream ended');
    expect(store.active).toBe(0);
    // Seconds given as milliseconds land in 1970: the message shows the date.
    expect(await expectError(await events(server, String(Math.floor(Date.now() / 1000) + 3600)), 401, 'sync/unauthorized')).toMatch(/expired.*1970/);
    // A bare user id does not expire by itself.
    const { server: plain } = start({ auth: { verify: () => alice } });
    expect((await events(plain, 'any')).status).toBe(200);
  });

  it('when isRevoked says so: requests get 401 at once, an open stream ends at its next heartbeat', async () => {
    const revoked = new Set<string>();
    const asked: string[] = [];
    const { server, store } = start({
      heartbeatMs: 20,
      isRevoked: (token, userId) => {
        asked.push(userId);
        return revoked.has(token);
      },
    });
    const alice = uniqueUser('alice');
    const [token, other] = [await tokenFor(alice), await tokenFor(alice, { exp: '2h' })];
    const stream = sseReader(await events(server, token));
    expect((await stream.next()).event).toBe('poke');
    expect((await pushNote(server, alice, token, 1)).status).toBe(200);
    expect((await stream.next()).event).toBe('poke');
    expect(asked).toContain(alice);
    revoked.add(token);
    expect(await stream.next()).toEqual({ event: 'expired', data: '{"reason":"revoked"}' });
    await expect(stream.next()).rejects.toThrow('event stream ended');
    expect(store.active).toBe(0);
    expect(await expectError(await server.fetch(new Request('http://t/v1/pull', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{"cursor":null}' })), 401, 'sync/unauthorized')).toMatch(/revoked/);
    expect((await pushNote(server, alice, token, 2)).status).toBe(401);
    // Another token of the same user is not revoked.
    expect((await pushNote(server, alice, other, 2)).status).toBe(200);
  });
});

describe('streams per user', () => {
  it('refuses a user’s stream past maxStreamsPerUser with 429 sync/rate-limited, on this instance, until one closes', async () => {
    const { server, store } = start();
    const [alice, bob] = [uniqueUser('alice'), uniqueUser('bob')];
    const [ta, tb] = [await tokenFor(alice), await tokenFor(bob)];
    const held = [];
    for (let i = 0; i < DEFAULT_SYNC_LIMITS.maxStreamsPerUser; i++) {
      const response = await events(server, ta);
      expect(response.status).toBe(200);
      held.push(response);
    }
    expect(await expectError(await events(server, ta), 429, 'sync/rate-limited')).toMatch(/retry/);
    // Another user, and another instance on the same store, count apart.
    const bobs = await events(server, tb);
    expect(bobs.status).toBe(200);
    const other = createSyncServer({ store, auth: { secret: SECRET } });
    const elsewhere = await events(other, ta);
    expect(elsewhere.status).toBe(200);
    await held.pop()!.body!.cancel();
    const again = await events(server, ta);
    expect(again.status).toBe(200);
    await expectError(await events(server, ta), 429, 'sync/rate-limited');
    for (const response of [...held, again, bobs, elsewhere]) await response.body!.cancel();
    await other.close();
    await expect.poll(() => store.active).toBe(0);
  });

  it('counts a stream that ended by itself (expired) as closed', async () => {
    const alice = uniqueUser('alice');
    const { server } = start({ limits: { maxStreamsPerUser: 1 }, auth: { verify: (token) => ({ userId: alice, expiresAtMs: Number(token) }) } });
    const stream = sseReader(await events(server, String(Date.now() + 500)));
    await expectError(await events(server, String(Date.now() + 60_000)), 429, 'sync/rate-limited');
    while ((await stream.next()).event !== 'expired');
    await expect(stream.next()).rejects.toThrow('event stream ended');
    expect((await events(server, String(Date.now() + 60_000))).status).toBe(200);
  });

  it('counts a stream whose subscription failed as closed', async () => {
    const inner = sqliteStore(path.join(dir, `failing-${++n}.db`));
    let failures = 1;
    const store: ServerStore = {
      ...inner,
      subscribe: (userId, onPoke) => (failures-- > 0 ? Promise.reject(new Error('LISTEN failed')) : inner.subscribe(userId, onPoke)),
    };
    const server = createSyncServer({ store, auth: { secret: SECRET }, limits: { maxStreamsPerUser: 1 } });
    open.push({ store: inner, server });
    const token = await tokenFor(uniqueUser());
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    onTestFinished(() => logged.mockRestore());
    const failed = await events(server, token);
    await expect(failed.body!.getReader().read()).rejects.toMatchObject({ code: 'storage/failed' });
    expect(logged).toHaveBeenCalledWith('tabula-server: event stream failed', expect.objectContaining({ message: 'LISTEN failed' }));
    const stream = sseReader(await events(server, token));
    expect((await stream.next()).event).toBe('poke');
    await stream.close();
  });

  it('refuses limits that are not positive integers', () => {
    const store = sqliteStore(':memory:');
    for (const limits of [{ maxStreamsPerUser: 0 }, { maxStreamQueueBytes: Number.NaN }, { bodyTimeoutMs: 2 ** 31 }, { maxBodyBytes: 1.5 }]) {
      expect(() => createSyncServer({ store, auth: { secret: SECRET }, limits })).toThrow(expect.objectContaining({ code: 'argument/invalid', message: expect.stringContaining(`limits.${Object.keys(limits)[0]}`) as string }));
    }
  });
});

describe('a body that arrives too slowly', () => {
  it('gets 408 sync/timeout past bodyTimeoutMs, its stream cancelled and nothing stored', async () => {
    const { server, store } = start({ limits: { bodyTimeoutMs: 200 } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    let cancelled = false;
    const full = new TextEncoder().encode(JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: noteOp(alice, 's', 1) }] }));
    let sent = false;
    // All of the push but its last byte, then nothing.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (!sent) controller.enqueue(full.slice(0, -1));
        sent = true;
        return new Promise<void>(() => {});
      },
      cancel() {
        cancelled = true;
      },
    });
    const response = await server.fetch(
      new Request('http://t/v1/push', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body, duplex: 'half' } as RequestInit),
    );
    expect(await expectError(response, 408, 'sync/timeout')).toMatch(/200 ms.*nothing of it was stored/);
    expect(cancelled).toBe(true);
    expect(await store.lastSeq(alice, 'c')).toBe(0);
    expect(await store.head(alice)).toBe(0);
  });

  it('over HTTP: a socket that declares a Content-Length and stalls gets 408, and nothing is stored', async () => {
    const { server, store } = start({ limits: { bodyTimeoutMs: 300 } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const listening = await server.listen({ port: 0 });
    const { hostname, port } = new URL(listening.url);
    const body = JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: noteOp(alice, 's', 1) }] });
    const socket = connect(Number(port), hostname);
    onTestFinished(() => void socket.destroy());
    let answer = '';
    const answered = new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        answer += chunk.toString();
        if (answer.includes('\r\n\r\n')) resolve();
      });
    });
    socket.write(
      `POST /v1/push HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 20)}`,
    );
    await answered;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('sync/timeout');
    expect(await store.lastSeq(alice, 'c')).toBe(0);
    socket.destroy();
    // The server is not held up by it: a normal push goes through.
    expect((await fetch(`${listening.url}/v1/push`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body })).status).toBe(200);
  });
});
