/**
 * What the server tells a client about itself, and the clock bound it
 * keeps (issue 26, items 8–10): every answer, errors and event streams
 * included, carries `X-Tabula-Time` (its clock, ms) and `X-Tabula-Epoch`
 * (its store's id), and each poke its time; an op ordered more than
 * `limits.maxDriftMs` ahead of its clock is refused, naming the field, and
 * nothing of that push is stored; a pull from a cursor past the user's head
 * (a store restored from an older copy) is answered 409 with the head.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { makeOp, type Op } from '../../../src/core/index.js';
import { createSyncServer, sqliteStore } from '../../../src/server/index.js';
import { DEFAULT_SYNC_LIMITS, EPOCH, SYNC_HEADERS } from '../../../src/sync/protocol.js';
import { SECRET, noteOp, sseReader, tokenFor, uniqueUser } from '../../server/helpers.js';
import { startServerWithStore, storePath } from './helpers.js';

const keyAt = (wallMs: number, client = 'c1') => `${String(wallMs).padStart(15, '0')}.000000.${client}`;
const note = (userId: string, wallMs: number): Op => makeOp('note.add', { id: `n-${wallMs}-${Math.random()}`, userId, sessionId: 's', order: keyAt(wallMs), body: { text: 'n', runId: null, scope: null, at: 0 } });

async function call(server: { fetch(request: Request): Promise<Response> }, path: string, init: RequestInit & { token?: string | null; body?: string } = {}) {
  const { token, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (token) headers.set('authorization', `Bearer ${token}`);
  if (rest.body !== undefined) headers.set('content-type', 'application/json');
  return server.fetch(new Request(`http://t${path}`, { ...rest, method: rest.method ?? (rest.body === undefined ? 'GET' : 'POST'), headers }));
}

describe('sync server: its clock and its epoch on every answer', () => {
  it('sends X-Tabula-Time and the store’s X-Tabula-Epoch on answers, errors, event streams and pokes; CORS lets pages read them', async () => {
    const { server, store } = startServerWithStore();
    const cors = createSyncServer({ store, auth: { secret: SECRET }, cors: { origin: 'https://app.test' } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const epoch = await store.epoch();
    expect(epoch).toMatch(EPOCH);
    const before = Date.now();
    const answers = [
      await call(server, '/v1/health'),
      await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: noteOp(alice, 's', 1) }] }) }),
      await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [] }) }),
      await call(server, '/v1/push', { token: null, body: '{}' }),
      await call(server, '/v1/pull', { token, body: JSON.stringify({ cursor: null }) }),
      await call(server, '/v1/pull', { token, body: JSON.stringify({ cursor: '99' }) }),
      await call(server, '/v1/nowhere'),
      await call(server, '/v1/events', { token, method: 'HEAD' }),
      await call(cors, '/v1/push', { method: 'OPTIONS', headers: { origin: 'https://app.test', 'access-control-request-method': 'POST' } }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 400, 401, 200, 409, 404, 200, 204]);
    for (const answer of answers) {
      const time = Number(answer.headers.get(SYNC_HEADERS.time));
      expect(time).toBeGreaterThanOrEqual(before);
      expect(time).toBeLessThanOrEqual(Date.now());
      expect(answer.headers.get(SYNC_HEADERS.epoch)).toBe(epoch);
      await answer.body?.cancel();
    }
    const exposed = (await call(cors, '/v1/health', { headers: { origin: 'https://app.test' } })).headers.get('access-control-expose-headers') ?? '';
    expect(exposed.split(/,\s*/).sort()).toEqual([SYNC_HEADERS.epoch, SYNC_HEADERS.time].sort());

    const stream = await call(server, '/v1/events', { token });
    expect(stream.headers.get(SYNC_HEADERS.epoch)).toBe(epoch);
    const events = sseReader(stream);
    const poke = JSON.parse((await events.next()).data) as { cursor: string; time: number };
    expect(poke.cursor).toBe('1');
    expect(poke.time).toBeGreaterThanOrEqual(before);
    await events.close();
    await cors.close();
  });

  it('draws an epoch per storage, kept through a reopen; a new one once its row is deleted (docs/guide/server.md: a restored copy)', async () => {
    const file = storePath();
    const first = sqliteStore(file);
    const epoch = await first.epoch();
    await first.close();
    const again = sqliteStore(file);
    const other = sqliteStore(storePath());
    expect(await again.epoch()).toBe(epoch);
    expect(await other.epoch()).not.toBe(epoch);
    await again.close();
    await other.close();
    const raw = new Database(file);
    raw.prepare("DELETE FROM tabula_meta WHERE key = 'epoch'").run();
    raw.close();
    const restored = sqliteStore(file);
    expect(await restored.epoch()).not.toBe(epoch);
    await restored.close();
  });
});

describe('sync server: ops ordered ahead of its clock', () => {
  it('refuses an op, or a message update’s body.order, more than maxDriftMs ahead, naming the field, and stores nothing of that push', async () => {
    const { server, store } = startServerWithStore();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const now = Date.now();
    const ahead = now + DEFAULT_SYNC_LIMITS.maxDriftMs + 60_000;
    const refused = await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: note(alice, now) }, { seq: 2, op: note(alice, ahead) }] }) });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: { code: 'schema/invalid', message: expect.stringContaining('items[1].op.order') as unknown } });
    const update = makeOp('message.update', {
      id: 'u1',
      userId: alice,
      sessionId: 's',
      order: keyAt(now),
      body: { id: 'm1', status: 'complete', message: { role: 'user', content: 'x' }, order: keyAt(ahead), createdAt: now },
    });
    const body = await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: update }] }) });
    expect(await body.json()).toMatchObject({ error: { code: 'schema/invalid', message: expect.stringContaining('items[0].op.body.order') as unknown } });
    expect(await store.head(alice)).toBe(0);
    // Within the bound (a clock a minute fast), and behind the clock however far: taken.
    const taken = await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: note(alice, now + 60_000) }, { seq: 2, op: note(alice, 1_000) }] }) });
    expect(await taken.json()).toEqual({ lastSeq: 2 });
  });

  it('takes limits.maxDriftMs, and refuses one that is not a positive integer', async () => {
    const { server } = startServerWithStore({}, { maxDriftMs: 1000 });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const answer = await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: note(alice, Date.now() + 5000) }] }) });
    expect(answer.status).toBe(400);
    const store = sqliteStore(storePath());
    for (const maxDriftMs of [0, Number.NaN, 1.5]) {
      expect(() => createSyncServer({ store, auth: { secret: SECRET }, limits: { maxDriftMs } })).toThrow(expect.objectContaining({ code: 'argument/invalid', message: expect.stringContaining('limits.maxDriftMs') as unknown }));
    }
    await store.close();
  });
});

describe('sync server: a pull from past the head', () => {
  it('is answered 409 sync/gap with the head (the store holds less than the client pulled); an empty pull at the head is not', async () => {
    const { server } = startServerWithStore();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    await call(server, '/v1/push', { token, body: JSON.stringify({ clientId: 'c', items: [{ seq: 1, op: noteOp(alice, 's', 1) }, { seq: 2, op: noteOp(alice, 's', 2) }] }) });
    const atHead = await call(server, '/v1/pull', { token, body: JSON.stringify({ cursor: '2' }) });
    expect(await atHead.json()).toEqual({ items: [], cursor: '2', more: false });
    const past = await call(server, '/v1/pull', { token, body: JSON.stringify({ cursor: '7' }) });
    expect(past.status).toBe(409);
    expect(await past.json()).toMatchObject({ error: { code: 'sync/gap', head: 2 } });
  });
});
