/**
 * What openTabula({ sync }) hands the sync engine for blackboards (tabula.ts,
 * syncBoards): a board write in this tab is pushed by its own notice, with
 * no flush and no poll; the start-up scan opens only the boards that have a
 * database, so a session whose board was never used gets none from sync;
 * and a user's boards are the only ones the engine hears of.
 */
import { describe, expect, it } from 'vitest';
import { tokenFor, uniqueUser } from '../../server/helpers.js';
import { httpSync } from '../../../src/sync/index.js';
import { freshTabula, uniqueName } from '../store/helpers.js';
import { device, startServer, statusWhere, viaServer } from './helpers.js';

/** The names of the board databases this browser holds for database `name`. */
async function boardDatabases(name: string): Promise<string[]> {
  const all = await indexedDB.databases();
  return all.map((db) => db.name ?? '').filter((db) => db.startsWith(`${encodeURIComponent(name)}:`) && db.endsWith(':blackboard'));
}

describe('openTabula({ sync }): the boards the sync engine sees', () => {
  it('a board write is pushed by its own notice, without a flush or a poll', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    let pushes = 0;
    let onPush: () => void = () => undefined;
    const counting: typeof fetch = async (input, init) => {
      const response = await viaServer(server)(input, init);
      const url = input instanceof Request ? input.url : input instanceof URL ? input.href : input;
      if (url.endsWith('/v1/push') && response.ok) {
        pushes += 1;
        onPush();
      }
      return response;
    };
    // Polls once an hour: only the board's own notice can push within the test.
    const one = await freshTabula({ userId: alice, sync: httpSync({ url: 'http://sync.test', token: await tokenFor(alice), fetch: counting, pollIntervalMs: 3_600_000 }) });
    const board = (await one.session('chat')).blackboard;
    await board.whenLoaded;
    await statusWhere(one, (status) => status.lastSyncedAt !== null && status.state === 'idle' && status.pending === 0);
    const before = pushes;
    const pushed = new Promise<void>((resolve) => {
      onPush = () => {
        if (pushes > before) resolve();
      };
    });
    board.set('plan', 'pushed at once');
    await board.flushed();
    await pushed;

    const two = await device(server, alice);
    await two.sync?.flush();
    const seen = (await two.session('chat')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ plan: 'pushed at once' });
    await one.close();
    await two.close();
  });

  it('the start-up scan opens only boards that have a database: a session whose board was never used gets none', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('device');
    // Written without sync: the next start's scan is what finds the board write.
    const offline = await freshTabula({ name, userId: alice });
    await offline.session('plain');
    const board = (await offline.session('with-board')).blackboard;
    await board.whenLoaded;
    board.set('k', 1);
    await board.flushed();
    await offline.close();
    expect(await boardDatabases(name)).toHaveLength(1);

    const started = await device(server, alice, viaServer(server), name);
    await started.sync?.flush();
    expect(await boardDatabases(name)).toHaveLength(1);
    const other = await device(server, alice);
    await other.sync?.flush();
    const seen = (await other.session('with-board')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ k: 1 });
    expect((await other.sessions()).map((info) => info.sessionId).sort()).toEqual(['plain', 'with-board']);
    await started.close();
    await other.close();
  });

  it('where the browser cannot list databases, the start-up scan looks at every board', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('device');
    const offline = await freshTabula({ name, userId: alice });
    const board = (await offline.session('with-board')).blackboard;
    await board.whenLoaded;
    board.set('k', 'found without a list');
    await board.flushed();
    await offline.close();

    // As in a browser without IDBFactory.databases().
    Object.defineProperty(indexedDB, 'databases', { value: undefined, configurable: true });
    try {
      const started = await device(server, alice, viaServer(server), name);
      await started.sync?.flush();
      await started.close();
    } finally {
      Reflect.deleteProperty(indexedDB, 'databases');
    }
    const other = await device(server, alice);
    await other.sync?.flush();
    const seen = (await other.session('with-board')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ k: 'found without a list' });
    await other.close();
  });

  it('a board of another user written in a tab with sync on stays on this device', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const one = await device(server, alice);
    // Alice has a session "shared" too, with a board: a notice of Bob's board must not stand for hers.
    const hers = (await one.session('shared')).blackboard;
    await hers.whenLoaded;
    hers.set('owner', 'alice');
    await hers.flushed();
    await one.sync?.flush();
    const bobs = (await one.session('shared', { userId: 'bob' })).blackboard;
    await bobs.whenLoaded;
    bobs.set('owner', 'bob');
    await bobs.flushed();
    await one.sync?.flush();
    const two = await device(server, alice);
    await two.sync?.flush();
    const seen = (await two.session('shared')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ owner: 'alice' });
    expect(await two.sessions({ userId: 'bob' })).toEqual([]);
    await one.close();
    await two.close();
  });
});

describe('openTabula({ sync }): changes pulled from the server', () => {
  it('reach this tab’s listeners as remote', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const one = await device(server, alice);
    const two = await device(server, alice);
    // Listening before anything is written: two's own first cycle may be what pulls it.
    const heard: string[] = [];
    two.subscribe((change) => heard.push(`${change.sessionId}:${change.origin}`));
    await (await one.session('chat')).append({ role: 'user', content: 'from one' });
    await one.sync?.flush();
    await two.sync?.flush();
    expect(heard).toContain('chat:remote');
    expect(heard.every((entry) => entry.endsWith(':remote'))).toBe(true);
    await one.close();
    await two.close();
  });
});

describe('openTabula(): board notices as the Tabula closes', () => {
  // The registry announces a change once it is stored; a store that ended after close() had closed the
  // notices' channel posted on it, and the rejection went unhandled (seen in the live sync fuzz).
  it.each([false, true])('a board change stored while the Tabula closes is announced by no one, nothing thrown (sync %s)', { timeout: 60_000 }, async (withSync) => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const name = uniqueName('closing');
      const offline: typeof fetch = () => Promise.reject(new TypeError('offline'));
      const open = () => freshTabula({ name, ...(withSync ? { sync: httpSync({ url: 'http://sync.test', token: 'token', fetch: offline, pollIntervalMs: 3_600_000 }) } : {}) });
      // Changes stored one, two, three… turns of the event loop before close(): one of them ends after it.
      for (let turns = 0; turns < 8; turns++) {
        const tabula = await open();
        const board = (await tabula.session('s')).blackboard;
        await board.whenLoaded;
        board.set('first', turns);
        await new Promise((resolve) => setImmediate(resolve));
        board.set('second', turns);
        for (let turn = 0; turn < turns; turn++) await new Promise((resolve) => setImmediate(resolve));
        await tabula.close();
      }
      // A write of the same board, made durable, comes after every store the closed ones had started.
      const again = await open();
      const board = (await again.session('s')).blackboard;
      await board.whenLoaded;
      board.set('after', true);
      await board.flushed();
      await again.close();
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });
});
