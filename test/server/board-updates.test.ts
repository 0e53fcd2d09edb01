/**
 * Board updates through the server and its stores, on SQLite and
 * PostgreSQL: a push is held to the board rule clients apply updates by (a
 * subdocument, a Y.Text under a blackboard key, trailing bytes, the 14
 * bytes that hung Y.mergeUpdates: each refused with 400 naming the item,
 * nothing stored), and compaction merges only rows that rule accepts, at
 * most its budget at once, oldest first, whatever the history holds. The
 * hang is pushed to a server in a child process, so this suite cannot hang.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as Y from 'yjs';
import { afterAll, afterEach, describe, expect, inject, it, vi } from 'vitest';
import { COMPACT_MAX_ROWS } from '../../src/server/board.js';
import { createSyncServer, postgresStore, sqliteStore, type ServerStore, type StoreOptions, type StorePushItem, type SyncServer } from '../../src/server/index.js';
import { ErrorResponseSchema, type SyncLimits } from '../../src/sync/index.js';
import { content, hangUpdate, struct, update } from '../unit/core/yjs-bytes.js';
import { SECRET, boardOf, boardWriter, call, decodePulled, noteOp, tokenFor, uniqueUser } from './helpers.js';
import { startServerProcess } from './process.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-board-updates-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const url = inject('postgresUrl');
let n = 0;

/** Opens a store on fresh storage; `again` opens another on the same storage (another server instance, other options). */
type Open = (options?: StoreOptions) => { store: ServerStore; again: (options?: StoreOptions) => ServerStore };
const stores: [string, Open, () => string[]][] = [
  [
    'sqliteStore',
    (options) => {
      const file = path.join(dir, `store-${++n}.db`);
      return { store: sqliteStore(file, options), again: (more) => sqliteStore(file, more) };
    },
    () => ['--db', path.join(dir, `cli-${++n}.db`)],
  ],
  ['postgresStore', (options) => ({ store: postgresStore(url, options), again: (more) => postgresStore(url, more) }), () => ['--postgres', url]],
];

const opened: ServerStore[] = [];
const servers: SyncServer[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const server of servers.splice(0)) await server.close();
  for (const store of opened.splice(0)) await store.close();
});

function track<T extends ServerStore>(store: T): T {
  opened.push(store);
  return store;
}

/** The whole state of a doc `build` writes, as one update. */
function stateOf(build: (doc: Y.Doc) => void): Uint8Array {
  const doc = new Y.Doc();
  build(doc);
  return Y.encodeStateAsUpdate(doc);
}

const base64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

async function pullAll(store: ServerStore, userId: string) {
  const items = [];
  let after = 0;
  for (;;) {
    const page = await store.pull(userId, after, 1000, Number.MAX_SAFE_INTEGER);
    items.push(...page.items.map(decodePulled));
    if (page.items.length > 0) after = page.items[page.items.length - 1]!.position;
    if (!page.more) return items;
  }
}

describe.each(stores)('%s', (_name, open, cliArgs) => {
  /** A server over a fresh store, a user and their token, and a push of board `updates` (base64) after `ops` op items. */
  async function setup(limits: Partial<SyncLimits> = {}) {
    const { store } = open();
    track(store);
    const server = createSyncServer({ store, auth: { secret: SECRET }, limits });
    servers.push(server);
    const userId = uniqueUser();
    const token = await tokenFor(userId);
    const push = async (updates: readonly Uint8Array[], ops = 0) => {
      const items = [
        ...Array.from({ length: ops }, (_, i) => ({ seq: i + 1, op: noteOp(userId, 's', i + 1) })),
        ...updates.map((bytes, i) => ({ seq: ops + i + 1, board: { sessionId: 's', update: base64(bytes) } })),
      ];
      return call(server, '/v1/push', { clientId: 'c', items }, token);
    };
    return { store, userId, push };
  }

  function refusedWith(result: { status: number; json: unknown }, status: number, code: string): string {
    expect(result.status).toBe(status);
    const body = ErrorResponseSchema.parse(result.json);
    expect(body.error.code).toBe(code);
    return body.error.message;
  }

  it('refuses a push of subdocuments with 400, before a Y.Doc is built for any, and stores nothing', async () => {
    const { store, userId, push } = await setup();
    // Each item 7–8 bytes, each a whole Y.Doc to Y.decodeUpdate: near the size limit, 65 000 of them.
    const docs = update([{ client: 1, clock: 0, structs: [struct.item({ root: 'app' }, content.doc('')), ...Array.from({ length: 65_000 }, (_, i) => struct.item({ origin: [1, i] }, content.doc('')))] }]);
    expect(docs.length).toBeGreaterThan(480 * 1024);
    expect(docs.length).toBeLessThanOrEqual(512 * 1024);
    const message = refusedWith(await push([docs]), 400, 'schema/invalid');
    expect(message).toMatch(/^items\[0\]\.board\.update is refused: it holds a subdocument \(ContentDoc\)/);
    expect(await store.lastSeq(userId, 'c')).toBe(0);
  });

  it('refuses a Y.Text under a blackboard key with 400 naming items[i].board.update, and stores nothing of the push', async () => {
    const { store, userId, push } = await setup();
    const fine = stateOf((doc) => doc.getMap('blackboard').set('ok', { a: 1 }));
    const text = stateOf((doc) => doc.getMap('blackboard').set('k', new Y.Text('not JSON')));
    const message = refusedWith(await push([fine, text], 1), 400, 'schema/invalid');
    expect(message).toBe(
      'items[2].board.update is refused: key "k" would hold ContentType, not a JSON value; the blackboard map holds JSON values under keys, and boards hold no subdocuments (keep other shared types in other roots of the doc).',
    );
    expect(await store.lastSeq(userId, 'c')).toBe(0);
    // The same Y.Text in another root of the doc is the application's business.
    expect((await push([fine, stateOf((doc) => doc.getMap('notes').set('k', new Y.Text('x')))], 1)).status).toBe(200);
  });

  it('refuses an update with bytes after its delete set (it would be served back as it came)', async () => {
    const { store, userId, push } = await setup();
    const state = stateOf((doc) => doc.getMap('blackboard').set('k', 1));
    const message = refusedWith(await push([new Uint8Array([...state, 0, 0])]), 400, 'schema/invalid');
    expect(message).toBe(`items[0].board.update is not a Yjs update a client can apply: it is not an update Yjs writes (2 bytes after the delete set, at byte ${state.length}); send Y.encodeStateAsUpdate output or an update event's bytes.`);
    expect(await store.lastSeq(userId, 'c')).toBe(0);
  });

  it('refuses an update of more structs than maxUpdateStructs with 413', async () => {
    const { store, userId, push } = await setup({ maxUpdateStructs: 3 });
    const runs = (count: number) => update([{ client: 1, clock: 0, structs: Array.from({ length: count }, () => struct.gc(1)) }]);
    expect((await push([runs(3)])).status).toBe(200);
    const message = refusedWith(await push([runs(4)]), 413, 'sync/too-large');
    expect(message).toBe('items[0].board.update is refused: it holds more than 3 structs and deleted ranges, the limit for one board update; push smaller updates.');
    expect(await store.lastSeq(userId, 'c')).toBe(1);
  });

  it('answers at once a push of the 14 bytes that hung Y.mergeUpdates and 100 board updates, and still answers /v1/health', async () => {
    const server = await startServerProcess(cliArgs());
    try {
      const userId = uniqueUser();
      const token = await tokenFor(userId);
      // A fresh doc's first map set of client 1 (clock 0, length 1), then 99 other devices' and the 14 bytes of client 1.
      const first = new Y.Doc();
      first.clientID = 1;
      first.getMap('blackboard').set('k0', 0);
      const updates = [Y.encodeStateAsUpdate(first), ...Array.from({ length: 99 }, (_, i) => stateOf((doc) => doc.getMap('blackboard').set(`k${i + 1}`, i + 1))), hangUpdate(1)];
      const items = updates.map((bytes, i) => ({ seq: i + 1, board: { sessionId: 's', update: base64(bytes) } }));
      // Before, the push stored all 101 and compaction never returned: no answer, to this or any request.
      const response = await fetch(`${server.url}/v1/push`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ clientId: 'c', items }),
        signal: AbortSignal.timeout(20_000),
      });
      const message = refusedWith({ status: response.status, json: await response.json() }, 400, 'schema/invalid');
      expect(message).toMatch(/^items\[100\]\.board\.update is not a Yjs update a client can apply: it holds a clock of 9007199254740994, past Number\.MAX_SAFE_INTEGER/);
      const health = await fetch(`${server.url}/v1/health`, { signal: AbortSignal.timeout(20_000) });
      expect(health.status).toBe(200);
      // Without the 14 bytes the same push lands, and compacts.
      const landed = await fetch(`${server.url}/v1/push`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ clientId: 'c', items: items.slice(0, 100) }),
        signal: AbortSignal.timeout(20_000),
      });
      expect(await landed.json()).toEqual({ lastSeq: 100 });
    } finally {
      // SIGKILL: a process stuck in a loop would not act on SIGTERM.
      server.child.kill('SIGKILL');
      await server.exited;
    }
  }, 60_000);

  describe('compaction', () => {
    /** `count` board updates of one life, pushed by a store that does not compact; returns the writer and the updates. */
    async function history(again: (options?: StoreOptions) => ServerStore, userId: string, count: number) {
      const writer = boardWriter();
      const updates = Array.from({ length: count }, (_, i) => writer.write(`k${i}`, `value ${i}`));
      const loader = track(again({ compactBoardAfter: Number.MAX_SAFE_INTEGER }));
      for (let from = 0; from < count; from += 500) {
        const items: StorePushItem[] = updates.slice(from, from + 500).map((bytes, i) => ({ seq: from + i + 1, board: { sessionId: 's', update: bytes } }));
        await loader.push(userId, 'loader', items);
      }
      return { writer, updates };
    }

    it('merges the oldest rows within compactBudgetBytes, at the newest position it replaces, whatever the history holds', async () => {
      const { store, again } = open({ compactBoardAfter: Number.MAX_SAFE_INTEGER });
      track(store);
      const userId = uniqueUser();
      const { writer, updates } = await history(again, userId, 2000);
      const budget = updates.slice(0, 300).reduce((sum, bytes) => sum + bytes.length, 0);
      const compacting = track(again({ compactBudgetBytes: budget }));
      await compacting.push(userId, 'device', [{ seq: 1, board: { sessionId: 's', update: writer.write('last', 'x') } }]);
      const pulled = await pullAll(compacting, userId);
      // Before: all 2001 merged into one, in the push. Now the 300 oldest, at the 300th's position.
      expect(pulled).toHaveLength(2001 - 299);
      expect(pulled[0]).toMatchObject({ position: 300, clientId: null });
      expect(pulled.slice(1).map((item) => item.position)).toEqual(Array.from({ length: 1701 }, (_, i) => 301 + i));
      expect(pulled.slice(1).every((item) => item.clientId !== null)).toBe(true);
      expect(boardOf(pulled.map((item) => ('board' in item ? item.board.update : new Uint8Array())))).toEqual(writer.doc.getMap('board').toJSON());
      // A reader with the first 100 updates only still ends with the whole board.
      const late = (await compacting.pull(userId, 100, 5000, Number.MAX_SAFE_INTEGER)).items.map(decodePulled);
      expect(boardOf([...updates.slice(0, 100), ...late.map((item) => ('board' in item ? item.board.update : new Uint8Array()))])).toEqual(writer.doc.getMap('board').toJSON());
    }, 120_000);

    it(`merges at most ${COMPACT_MAX_ROWS} rows at once, however small`, async () => {
      const { store, again } = open({ compactBoardAfter: Number.MAX_SAFE_INTEGER });
      track(store);
      const userId = uniqueUser();
      const { writer } = await history(again, userId, 1200);
      const compacting = track(again());
      await compacting.push(userId, 'device', [{ seq: 1, board: { sessionId: 's', update: writer.write('last', 'x') } }]);
      const pulled = await pullAll(compacting, userId);
      expect(pulled).toHaveLength(1201 - (COMPACT_MAX_ROWS - 1));
      expect(pulled[0]).toMatchObject({ position: COMPACT_MAX_ROWS, clientId: null });
      // The next push merges the next window, starting with the merged row.
      await compacting.push(userId, 'device', [{ seq: 2, board: { sessionId: 's', update: writer.write('more', 'y') } }]);
      const again2 = await pullAll(compacting, userId);
      expect(again2).toHaveLength(pulled.length + 1 - (COMPACT_MAX_ROWS - 1));
      expect(boardOf(again2.map((item) => ('board' in item ? item.board.update : new Uint8Array())))).toEqual(writer.doc.getMap('board').toJSON());
    }, 120_000);

    it('leaves a stored row the board rule refuses out of the merge, where it was, and logs it once', async () => {
      const errors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      // Compacting at every push from 3 rows on, so the refused row is read again by the next one.
      const { store } = open({ compactBoardAfter: 2 });
      track(store);
      const userId = uniqueUser();
      const writer = boardWriter();
      // A row stored before the server checked pushes with the rule: a Y.Text under a blackboard key.
      const bad = stateOf((doc) => doc.getMap('blackboard').set('k', new Y.Text('x')));
      const items: StorePushItem[] = Array.from({ length: 101 }, (_, i) => ({ seq: i + 1, board: { sessionId: 's', update: i === 50 ? bad : writer.write(`k${i}`, 'v') } }));
      await store.push(userId, 'old', items);
      let pulled = await pullAll(store, userId);
      // Before: all 101 merged into one, the Y.Text with them. Now the runs on either side, each at its last position.
      expect(pulled.map((item) => [item.position, item.clientId])).toEqual([
        [50, null],
        [51, 'old'],
        [101, null],
      ]);
      expect('board' in pulled[1]! && pulled[1].board.update).toEqual(bad);
      await store.push(userId, 'old', [{ seq: 102, board: { sessionId: 's', update: writer.write('next', 'v') } }]);
      pulled = await pullAll(store, userId);
      expect(pulled.map((item) => item.position)).toEqual([50, 51, 102]);
      expect(boardOf(pulled.filter((item) => item.position !== 51).map((item) => ('board' in item ? item.board.update : new Uint8Array())))).toEqual(writer.doc.getMap('board').toJSON());
      expect(errors.mock.calls.filter(([message]) => String(message).includes('board update 51 '))).toHaveLength(1);
    });
  });
});
