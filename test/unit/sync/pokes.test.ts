/**
 * Pokes that carry a push's items: the leader applies them like a pulled
 * page, without a pull, only when they continue its cursor exactly; any
 * other poke (an older one, a later one after a lost one, a repeated one,
 * one it cannot read or that names another user) makes it pull. The device
 * under test reads an event stream the test writes: each poke is one the
 * server really sent (read from the server's own stream), delivered when,
 * how often and in what order the test says.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Tabula } from '../../../src/index.js';
import type { SyncServer } from '../../../src/server/index.js';
import { PokeEventSchema, SYNC_PATHS } from '../../../src/sync/index.js';
import { sseReader, tokenFor, uniqueUser } from '../../server/helpers.js';
import { fcParams } from '../seed.js';
import { device, nextChange, pausedDevice, startServer, statusWhere, viaServer } from './helpers.js';

/**
 * A fetch to `server` whose event stream the test writes (`send`), keeping the text of every pull
 * answer. `send` resolves once the client has read the event and asked for the next one. `holdNext`
 * keeps the next answer to a path from the client (the server has answered it) until `release()`.
 */
function fedEvents(server: SyncServer) {
  const pulls: string[] = [];
  const holds = new Map<string, { reached: (text: string) => void; released: Promise<void> }>();
  const encoder = new TextEncoder();
  let stream: ReadableStreamDefaultController<Uint8Array> | null = null;
  let asked: (() => void) | null = null;
  let opened: () => void = () => {};
  const open = new Promise<void>((resolve) => (opened = resolve));
  const via = viaServer(server);
  const fetchImpl: typeof fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url.endsWith(SYNC_PATHS.events)) {
      const body = new ReadableStream<Uint8Array>(
        {
          start(controller) {
            stream = controller;
            opened();
          },
          // Called when the client reads with nothing queued: it has handled every event sent so far.
          pull() {
            asked?.();
            asked = null;
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
    }
    const response = await via(input, init);
    const path = new URL(url).pathname;
    const hold = holds.get(path);
    if (!url.endsWith(SYNC_PATHS.pull) && !hold) return response;
    const text = await response.text();
    if (url.endsWith(SYNC_PATHS.pull)) pulls.push(text);
    if (hold) {
      holds.delete(path);
      hold.reached(text);
      await hold.released;
    }
    return new Response(text, { status: response.status, headers: response.headers });
  };
  return {
    fetch: fetchImpl,
    pulls,
    holdNext(path: string): { answered: Promise<string>; release: () => void } {
      let reached: (text: string) => void = () => {};
      let release: () => void = () => {};
      const answered = new Promise<string>((resolve) => (reached = resolve));
      holds.set(path, { reached, released: new Promise<void>((resolve) => (release = resolve)) });
      return { answered, release };
    },
    async send(data: string): Promise<void> {
      await open;
      const read = new Promise<void>((resolve) => (asked = resolve));
      stream!.enqueue(encoder.encode(`event: poke\ndata: ${data}\n\n`));
      await read;
    },
  };
}

/** The server's own event stream for `userId`: `next()` is the data of its next poke. */
async function serverPokes(server: SyncServer, userId: string) {
  const response = await server.fetch(new Request(`http://sync.test${SYNC_PATHS.events}`, { headers: { authorization: `Bearer ${await tokenFor(userId)}` } }));
  const reader = sseReader(response);
  await reader.next(); // the poke sent on connect, without items
  return { next: async () => (await reader.next()).data, close: () => reader.close() };
}

/** The texts of a device's messages in the session, in order. */
async function texts(tabula: Tabula, sessionId = 'chat'): Promise<string[]> {
  const messages = await (await tabula.session(sessionId)).messages();
  return messages.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content)));
}

/** A writer (driven by flush) and a reader whose stream the test feeds, both of one user, in step. */
async function setup() {
  const server = startServer();
  const alice = uniqueUser('alice');
  const pokes = await serverPokes(server, alice);
  const writer = await pausedDevice(alice, viaServer(server), 'writer');
  const chat = await writer.session('chat');
  await writer.sync?.flush();
  const createPoke = await pokes.next();
  const fed = fedEvents(server);
  const reader = await device(server, alice, fed.fetch);
  // The reader's first cycle pulled the session: its cursor is the head.
  await statusWhere(reader, (status) => status.lastSyncedAt !== null);
  expect(await reader.sessions()).toHaveLength(1);
  /** Appends `text` on the writer and pushes it; returns the poke the server sent for it. */
  const write = async (text: string): Promise<string> => {
    await chat.append({ role: 'user', content: text });
    await writer.sync?.flush();
    return pokes.next();
  };
  const close = async () => {
    await pokes.close();
    await writer.close();
    await reader.close();
  };
  return { server, alice, writer, reader, fed, write, createPoke, pokes, chat, close };
}

describe('httpSync: pokes that carry items', () => {
  it('applies a poke’s items without a pull when they continue its cursor', { timeout: 60_000 }, async () => {
    const { reader, fed, write, close } = await setup();
    const poke = await write('hello by poke');
    expect(PokeEventSchema.parse(JSON.parse(poke)).items).toHaveLength(1);
    const pullsBefore = fed.pulls.length;
    const arrived = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    await fed.send(poke);
    await arrived;
    expect(await texts(reader)).toEqual(['hello by poke']);
    // No pull brought it: none was made, and no pull answer ever held it.
    expect(fed.pulls.length).toBe(pullsBefore);
    expect(fed.pulls.some((answer) => answer.includes('hello by poke'))).toBe(false);
    await close();
  });

  it('pulls instead when a poke’s items do not continue its cursor (one was lost), and never doubles an item', { timeout: 60_000 }, async () => {
    const { reader, fed, write, close } = await setup();
    const first = await write('one');
    const second = await write('two');
    const arrived = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    // The first poke is lost: the second's items start after the first's, not at the reader's cursor.
    await fed.send(second);
    await arrived;
    await expect.poll(() => texts(reader)).toEqual(['one', 'two']);
    expect(fed.pulls.some((answer) => answer.includes('"one"') && answer.includes('"two"'))).toBe(true);
    // The lost poke arrives late, then the second again: neither adds anything.
    await fed.send(first);
    await fed.send(second);
    await reader.sync?.flush();
    expect(await texts(reader)).toEqual(['one', 'two']);
    expect(await (await reader.session('chat')).messageCount()).toBe(2);
    await close();
  });

  it('refuses a poke whose items name another user, and a poke it cannot read; it pulls what the server has', { timeout: 60_000 }, async () => {
    const { alice, reader, fed, write, close } = await setup();
    const bob = uniqueUser('bob');
    const poke = PokeEventSchema.parse(JSON.parse(await write('real')));
    const forged = { ...poke, items: poke.items!.map((item) => ('op' in item ? { ...item, op: { ...item.op, userId: bob, sessionId: 'planted' } } : item)) };
    const arrived = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    await fed.send(JSON.stringify(forged));
    await arrived;
    expect(await texts(reader)).toEqual(['real']);
    expect(await reader.sessions({ userId: bob })).toEqual([]);
    expect((await reader.sessions({ userId: alice })).map((session) => session.sessionId)).toEqual(['chat']);
    // Unreadable data is a poke without items: the reader pulls.
    const pulls = fed.pulls.length;
    const next = await write('after garbage');
    expect(next).toContain('after garbage');
    const again = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    await fed.send('{"cursor":"not a cursor","items":[]}');
    await again;
    expect(fed.pulls.length).toBeGreaterThan(pulls);
    expect(await texts(reader)).toEqual(['real', 'after garbage']);
    await close();
  });

  it('does not apply pokes while paused; flush() pulls what they announced', { timeout: 60_000 }, async () => {
    const { reader, fed, write, close } = await setup();
    reader.sync?.pause();
    await fed.send(await write('while paused'));
    await reader.sync?.flush();
    expect(await texts(reader)).toEqual(['while paused']);
    // flush() pulled it: the paused leader had left the poke alone (else the pull answer would not hold it).
    expect(fed.pulls.some((answer) => answer.includes('while paused'))).toBe(true);
    await close();
  });

  it('a leader whose pokes flow pushes a local write without pulling its own items back', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const pokes = await serverPokes(server, alice);
    const fed = fedEvents(server);
    const tabula = await device(server, alice, fed.fetch);
    await statusWhere(tabula, (status) => status.lastSyncedAt !== null);
    // The stream's first poke (sent on connect, without items) makes the leader pull once.
    const pulls = fed.pulls.length;
    await fed.send('{"cursor":"0"}');
    await expect.poll(() => fed.pulls.length).toBeGreaterThan(pulls);
    const since = Date.now();
    await (await tabula.session('chat')).append({ role: 'user', content: 'pushed, not pulled' });
    // The push reached the server (its poke is out; the session's create may have gone in a push of its
    // own) and the cycle that pushed it is over.
    while (!(await pokes.next()).includes('pushed, not pulled'));
    await statusWhere(tabula, (status) => status.state === 'idle' && status.pending === 0 && (status.lastSyncedAt ?? 0) >= since);
    expect(fed.pulls.some((answer) => answer.includes('pushed, not pulled'))).toBe(false);
    await pokes.close();
    await tabula.close();
  });
});

describe('httpSync: pokes while a cycle runs', () => {
  it('applies a poke while its own push waits for the server’s answer, not after it', { timeout: 60_000 }, async () => {
    const { writer, reader, fed, pokes, chat, close } = await setup();
    const held = fed.holdNext(SYNC_PATHS.push);
    await (await reader.session('chat')).append({ role: 'user', content: 'from the reader' });
    await held.answered;
    // The server has the reader's item (its poke is the next) and the reader waits for the answer.
    const own = await pokes.next();
    await chat.append({ role: 'user', content: 'from the writer' });
    await writer.sync?.flush();
    const theirs = await pokes.next();
    const pulls = fed.pulls.length;
    const arrived = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    await fed.send(own);
    await fed.send(theirs);
    // Were the poke applied after the cycle, this would never resolve while the push is held.
    await arrived;
    expect(await texts(reader)).toEqual(['from the reader', 'from the writer']);
    expect(fed.pulls.length).toBe(pulls);
    held.release();
    await reader.sync?.flush();
    expect(await texts(reader)).toEqual(['from the reader', 'from the writer']);
    await close();
  });

  it('a pull answered before pokes that overtook it leaves the cursor where the pokes moved it', { timeout: 60_000 }, async () => {
    const { reader, fed, write, close } = await setup();
    const first = await write('one');
    const held = fed.holdNext(SYNC_PATHS.pull);
    const flushed = reader.sync?.flush();
    // The pull's page holds 'one' only, and the reader does not have it yet.
    expect(await held.answered).toContain('"one"');
    const second = await write('two');
    const arrived = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    await fed.send(first);
    await fed.send(second);
    await arrived;
    await expect.poll(() => texts(reader)).toEqual(['one', 'two']);
    held.release();
    await flushed;
    // Had the late page moved the cursor back to after 'one', the next poke would not continue it: a pull.
    const pulls = fed.pulls.length;
    const third = nextChange(reader, (change) => change.origin === 'remote' && change.kinds.includes('message.append'));
    await fed.send(await write('three'));
    await third;
    expect(await texts(reader)).toEqual(['one', 'two', 'three']);
    expect(fed.pulls.length).toBe(pulls);
    expect(await (await reader.session('chat')).messageCount()).toBe(3);
    await close();
  });
});

describe('httpSync: pokes in any order, lost or repeated, never lose or double an item', () => {
  it('a reader fed any sequence of the server’s pokes, with pulls whose answers are held while pokes (and other pulls) overtake them, then flushed, holds exactly what the writer wrote', { timeout: 240_000 }, async () => {
    // Actions: write a message; deliver the k-th poke sent so far (k modulo their number); start a flush
    // whose next pull answer is held; let it go on.
    const action = fc.oneof(
      fc.constant({ kind: 'write' as const }),
      fc.nat(20).map((k) => ({ kind: 'deliver' as const, k })),
      fc.constant({ kind: 'hold' as const }),
      fc.constant({ kind: 'release' as const }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 14 }), async (actions) => {
        const { reader, fed, write, createPoke, close } = await setup();
        let held: { release: () => void; flushed: Promise<void> | undefined } | null = null;
        const release = async () => {
          if (!held) return;
          held.release();
          await held.flushed;
          held = null;
        };
        try {
          const sent = [createPoke];
          const written: string[] = [];
          for (const step of actions) {
            if (step.kind === 'write') {
              written.push(`m${written.length}`);
              sent.push(await write(written[written.length - 1]!));
            } else if (step.kind === 'deliver') {
              await fed.send(sent[step.k % sent.length]!);
            } else if (step.kind === 'hold') {
              if (held) continue;
              const hold = fed.holdNext(SYNC_PATHS.pull);
              held = { release: hold.release, flushed: reader.sync?.flush() };
              await hold.answered;
            } else {
              await release();
            }
          }
          await release();
          await reader.sync?.flush();
          expect(await texts(reader)).toEqual(written);
          expect(await (await reader.session('chat')).messageCount()).toBe(written.length);
        } finally {
          await release();
          await close();
        }
      }),
      fcParams(25),
    );
  });
});
