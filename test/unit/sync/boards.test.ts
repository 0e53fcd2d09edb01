/**
 * Blackboards over sync (Node, fake-indexeddb, the real server in-process):
 * a board written on one device reaches another (sets and deletes, origin
 * 'remote'), nothing pulled is sent back, a change written while no sync
 * engine ran (a crash before it was queued) is found on the next start, a
 * queued row survives a restart, a bad board update from the server
 * changes nothing, and a board update goes only to the session life it
 * was written in (no device ever shows an old life's board in a new one).
 */
import { fromBase64 } from 'lib0/buffer';
import { describe, expect, it, vi } from 'vitest';
import * as Y from 'yjs';
import { ApproxTokenCounter, type BlackboardChange, type JsonValue, type Tabula } from '../../../src/index.js';
import { BLACKBOARD_MAP } from '../../../src/blackboard/validate.js';
import { createDb } from '../../../src/store/db/schema.js';
import { syncNames } from '../../../src/store/replication/keys.js';
import { tokenFor, uniqueUser } from '../../server/helpers.js';
import { freshTabula, uniqueName } from '../store/helpers.js';
import { httpSync } from '../../../src/sync/index.js';
import { device, pausedDevice, startServer, viaServer } from './helpers.js';

/** The names of the board databases this browser holds for database `name`. */
async function boardDatabases(name: string): Promise<string[]> {
  const all = await indexedDB.databases();
  return all.map((db) => db.name ?? '').filter((db) => db.startsWith(`${encodeURIComponent(name)}:`) && db.endsWith(':blackboard'));
}

/** Outbox rows of a device that hold a board update. */
async function queuedBoards(name: string): Promise<number> {
  const db = createDb(name);
  const count = await db.outbox.filter((row) => row.board !== undefined).count();
  db.close();
  return count;
}

describe('httpSync: blackboards', () => {
  it('a board written on one device reaches another, sets and deletes, as remote changes', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const one = await device(server, alice);
    const two = await device(server, alice);
    const board = (await one.session('chat')).blackboard;
    await board.whenLoaded;
    board.set('plan', { steps: ['read', 'write'] });
    board.set('draft', 'to be removed');
    await board.flushed();
    await one.sync?.flush();
    await two.sync?.flush();
    const seen = (await two.session('chat')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ plan: { steps: ['read', 'write'] }, draft: 'to be removed' });

    // A delete moves no state vector: it must still travel.
    const changes: BlackboardChange[] = [];
    seen.observe((batch) => changes.push(...batch));
    board.delete('draft');
    await board.flushed();
    await one.sync?.flush();
    await two.sync?.flush();
    expect(seen.toJSON()).toEqual({ plan: { steps: ['read', 'write'] } });
    expect(changes).toContainEqual(expect.objectContaining({ key: 'draft', origin: 'remote' }));

    // What device two pulled is not pushed back: nothing of the board is queued there.
    expect(await queuedBoards(two.name)).toBe(0);
    await two.sync?.flush();
    expect(two.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
    await one.close();
    await two.close();
  });

  it('a change stored while no sync engine noticed it (a crash before it was queued) is found on the next start', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const first = await device(server, alice);
    await first.session('chat');
    await first.sync?.flush();
    await first.close();
    const { name } = first;
    // The board is written by a Tabula without sync: no engine ever heard of the change, as after a crash.
    const offline = await freshTabula({ name, userId: alice });
    const board = (await offline.session('chat')).blackboard;
    await board.whenLoaded;
    board.set('written before the crash', true);
    await board.flushed();
    await offline.close();

    const restarted = await device(server, alice, viaServer(server), name);
    await restarted.sync?.flush();
    const other = await device(server, alice);
    await other.sync?.flush();
    const seen = (await other.session('chat')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ 'written before the crash': true });
    await restarted.close();
    await other.close();
  });

  it('a board row queued but not pushed (the server down) is pushed after a restart, once', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    let serverUp = false;
    const flaky: typeof fetch = (input, init) => (serverUp ? viaServer(server)(input, init) : Promise.reject(new TypeError('fetch failed')));
    const first = await device(server, alice, flaky);
    const board = (await first.session('chat')).blackboard;
    await board.whenLoaded;
    board.set('k', 1);
    await board.flushed();
    await expect(first.sync?.flush()).rejects.toMatchObject({ code: 'sync/offline' });
    expect(first.sync?.status()).toMatchObject({ state: 'offline' });
    expect(await queuedBoards(first.name)).toBe(1);
    await first.close();

    serverUp = true;
    const again = await device(server, alice, flaky, first.name);
    await again.sync?.flush();
    expect(await queuedBoards(first.name)).toBe(0);
    const other = await device(server, alice);
    await other.sync?.flush();
    const seen = (await other.session('chat')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ k: 1 });
    await again.close();
    await other.close();
  });

  it('a pulled board update that is not a valid blackboard change is refused and changes nothing', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const writer = await device(server, alice);
    const board = (await writer.session('chat')).blackboard;
    await board.whenLoaded;
    board.set('k', 'v');
    await board.flushed();
    await writer.sync?.flush();
    // A server that garbles every board update it sends.
    const garbling: typeof fetch = async (input, init) => {
      const response = await viaServer(server)(input, init);
      if (!String(input instanceof Request ? input.url : input).endsWith('/v1/pull')) return response;
      const page = (await response.json()) as { items: { board?: { update: string } }[] };
      for (const item of page.items) if (item.board) item.board.update = 'AQIDBAUGBwg='; // does not decode as a Yjs update
      return Response.json(page, { status: response.status });
    };
    const reader = await device(server, alice, garbling);
    await expect(reader.sync?.flush()).rejects.toMatchObject({ code: 'schema/invalid' });
    expect(reader.sync?.status()).toMatchObject({ state: 'error', error: { code: 'schema/invalid' } });
    // Nothing of the page was applied: not the session, not the cursor.
    expect(await reader.sessions()).toEqual([]);
    const db = createDb(reader.name);
    expect(await db.meta.get(syncNames.cursor(alice))).toBeUndefined();
    db.close();
    await writer.close();
    await reader.close();
  });

  describe('a session deleted on another device', () => {
    /** Device one of alice, whose session 'chat' has a board holding a secret, pushed. */
    const boardOnDeviceOne = async () => {
      const server = startServer();
      const alice = uniqueUser('alice');
      const one = await device(server, alice);
      const written = (await one.session('chat')).blackboard;
      await written.whenLoaded;
      written.set('secret', 'of the old life');
      await written.flushed();
      await one.sync?.flush();
      return { server, alice, one };
    };

    it('closes its board in every tab here (writes fail with session/not-found), deletes its database, and a re-created session starts empty', { timeout: 60_000 }, async () => {
      const { server, alice, one } = await boardOnDeviceOne();

      // Device two: a leading tab and a second tab, both with the board open.
      const name = uniqueName('device');
      const leader = await device(server, alice, viaServer(server), name);
      await leader.sync?.flush();
      const tab = await device(server, alice, viaServer(server), name);
      const boards = [(await leader.session('chat')).blackboard, (await tab.session('chat')).blackboard];
      for (const board of boards) {
        await board.whenLoaded;
        await vi.waitFor(() => expect(board.get('secret')).toBe('of the old life'), { timeout: 30_000 });
      }
      expect(await boardDatabases(name)).toHaveLength(1);

      await one.deleteSession('chat');
      await one.sync?.flush();
      await leader.sync?.flush();
      for (const board of boards) {
        await vi.waitFor(() => expect(() => board.set('late', 'write')).toThrow(expect.objectContaining({ code: 'session/not-found' })), { timeout: 30_000 });
      }
      await vi.waitFor(async () => expect(await boardDatabases(name)).toEqual([]), { timeout: 30_000 });

      // Created again on device one: device two's board of it holds only the new life.
      const again = (await one.session('chat')).blackboard;
      await again.whenLoaded;
      again.set('fresh', true);
      await again.flushed();
      await one.sync?.flush();
      await leader.sync?.flush();
      const reborn = (await leader.session('chat')).blackboard;
      await reborn.whenLoaded;
      expect(reborn.toJSON()).toEqual({ fresh: true });
      expect(leader.reported).toEqual([]);
      await one.close();
      await leader.close();
      await tab.close();
    });

    it('deletes the board database of a device that has not loaded the board code since (no Yjs needed)', { timeout: 60_000 }, async () => {
      const { server, alice, one } = await boardOnDeviceOne();

      const name = uniqueName('device');
      const before = await device(server, alice, viaServer(server), name);
      await before.sync?.flush();
      const board = (await before.session('chat')).blackboard;
      await board.whenLoaded;
      await vi.waitFor(() => expect(board.get('secret')).toBe('of the old life'), { timeout: 30_000 });
      await before.close();
      expect(await boardDatabases(name)).toHaveLength(1);

      await one.deleteSession('chat');
      await one.sync?.flush();
      // Opened again (a reload): the first pull brings the delete; no board is opened here.
      const after = await device(server, alice, viaServer(server), name);
      await after.sync?.flush();
      await vi.waitFor(async () => expect(await boardDatabases(name)).toEqual([]), { timeout: 30_000 });
      expect(await after.sessions()).toEqual([]);
      await one.close();
      await after.close();
    });
  });

  describe('session lives', () => {
    /** Sets `values` on the board of session `s`, each key in its own stored change, pushing each with a flush. */
    async function writeBoard(tabula: Tabula, values: Record<string, JsonValue>, flush = true): Promise<void> {
      const board = (await tabula.session('s')).blackboard;
      await board.whenLoaded;
      for (const [key, value] of Object.entries(values)) {
        board.set(key, value);
        await board.flushed();
        if (flush) await tabula.sync?.flush();
      }
    }

    async function boardOf(tabula: Tabula): Promise<Record<string, JsonValue>> {
      const board = (await tabula.session('s')).blackboard;
      await board.whenLoaded;
      return board.toJSON();
    }

    /** A device that pulls everything afresh. */
    async function freshDevice(server: ReturnType<typeof startServer>, user: string): Promise<Tabula> {
      const fresh = await freshTabula({
        name: uniqueName('fresh'),
        userId: user,
        tokenCounter: new ApproxTokenCounter(),
        sync: httpSync({ url: 'http://sync.test', token: await tokenFor(user), fetch: viaServer(server), pollIntervalMs: 3_600_000 }),
      });
      await fresh.sync?.flush();
      return fresh;
    }

    // The server merged every board update of a session into one row placed after the newest, across a
    // delete: a fresh device got the old life's board in the new life.
    it('a fresh device pulling a session deleted and created again after more board updates than the server compacts shows only the new life\'s board', { timeout: 60_000 }, async () => {
      const server = startServer({ compactBoardAfter: 4 });
      const alice = uniqueUser('alice');
      const one = await pausedDevice(alice, viaServer(server));
      await writeBoard(one, { old1: 1, old2: 2, old3: 3 });
      await one.deleteSession('s');
      await writeBoard(one, { new1: 1, new2: 2, new3: 3 });
      const fresh = await freshDevice(server, alice);
      expect(await boardOf(fresh)).toEqual({ new1: 1, new2: 2, new3: 3 });
      expect(await boardOf(one)).toEqual(await boardOf(fresh));
      await one.close();
      await fresh.close();
    });

    /** A profile that deleted and re-created session `s` (its new life's board holding `board`) before it turned sync on. */
    async function joinLate(server: ReturnType<typeof startServer>, user: string, board: Record<string, JsonValue>): Promise<Tabula> {
      const name = uniqueName('offline');
      const offline = await freshTabula({ name, userId: user, tokenCounter: new ApproxTokenCounter() });
      await (await offline.session('s')).append({ role: 'user', content: 'old' });
      await offline.deleteSession('s');
      await (await offline.session('s')).append({ role: 'user', content: 'kept' });
      await writeBoard(offline, board, false);
      await offline.close();
      const joined = await freshTabula({
        name,
        userId: user,
        tokenCounter: new ApproxTokenCounter(),
        sync: httpSync({ url: 'http://sync.test', token: await tokenFor(user), fetch: viaServer(server), pollIntervalMs: 3_600_000 }),
      });
      joined.sync?.pause();
      await joined.sync?.flush();
      return joined;
    }

    // Such a profile queues the new life's ops, not the delete: another device learns of the delete from
    // the life they name, and ends its own life of the session there, board included.
    it('a life created past a delete this device never pulled ends its life here, board and its database included', { timeout: 60_000 }, async () => {
      const server = startServer();
      const alice = uniqueUser('alice');
      const synced = await pausedDevice(alice, viaServer(server));
      await writeBoard(synced, { mine: 'first life' });
      const joined = await joinLate(server, alice, { theirs: 'second life' });
      await synced.sync?.flush();
      expect((await (await synced.session('s')).messages()).map((m) => m.content)).toEqual(['kept']);
      expect(await boardOf(synced)).toEqual({ theirs: 'second life' });
      await joined.sync?.flush();
      expect(await boardOf(joined)).toEqual({ theirs: 'second life' });
      await synced.close();
      await joined.close();
    });

    it('a board database of a life that a pulled create ended goes, even with no board update to apply', { timeout: 60_000 }, async () => {
      const server = startServer();
      const alice = uniqueUser('alice');
      const synced = await pausedDevice(alice, viaServer(server));
      await writeBoard(synced, { mine: 'first life' });
      const joined = await joinLate(server, alice, {});
      await synced.sync?.flush();
      expect((await (await synced.session('s')).messages()).map((m) => m.content)).toEqual(['kept']);
      await synced.close();
      await joined.close();
      expect(await boardDatabases(synced.dbName)).toEqual([]);
    });

    // A life is named by the order of the create that made it on this replica, and that order says nothing
    // about which life came last: here the current life (device one's second re-create) was created before
    // device zero's own life, which the pull ends. The registry took every life at or below the latest ended
    // one as ended, so the current life's board was born closed (set() threw session/not-found, also from
    // handles opened afterwards).
    it('a pulled current life created before this device\'s own ended life gets a live board', { timeout: 60_000 }, async () => {
      const server = startServer();
      const alice = uniqueUser('alice');
      const [zero, one] = [await pausedDevice(alice, viaServer(server)), await pausedDevice(alice, viaServer(server))];
      await writeBoard(one, { life: 1 });
      for (const life of [2, 3]) {
        await one.deleteSession('s');
        await writeBoard(one, { life });
      }
      // Device zero has pulled nothing: its own create of `s` is ordered after all of device one's.
      await writeBoard(zero, { zero: 'own life' }, false);
      await zero.sync?.flush();
      await writeBoard(zero, { zero: 'current life' });
      expect(await boardOf(zero)).toEqual({ life: 3, zero: 'current life' });
      await one.sync?.flush();
      expect(await boardOf(one)).toEqual({ life: 3, zero: 'current life' });
      await zero.close();
      await one.close();
    });

    // The snapshot of what was queued was kept per session, not per life: after a delete and a re-create,
    // what the server sent of the new life was not recorded as the server's, and the next push sent it back.
    it('what a device pulled of a re-created session\'s board is not pushed back with its own next write', { timeout: 60_000 }, async () => {
      const server = startServer();
      const alice = uniqueUser('alice');
      const pushedBoards: Record<string, JsonValue>[] = [];
      const recording: typeof fetch = async (input, init) => {
        const request = new Request(input instanceof Request ? input : String(input), init);
        if (new URL(request.url).pathname === '/v1/push') {
          const body = (await request.clone().json()) as { items: { board?: { update: string } }[] };
          for (const item of body.items) {
            if (!item.board) continue;
            const doc = new Y.Doc();
            Y.applyUpdate(doc, fromBase64(item.board.update));
            pushedBoards.push(doc.getMap<JsonValue>(BLACKBOARD_MAP).toJSON());
          }
        }
        return server.fetch(request);
      };
      const one = await pausedDevice(alice, viaServer(server));
      const two = await pausedDevice(alice, recording);
      await writeBoard(one, { shared: 'first life' });
      await two.sync?.flush();
      expect(await boardOf(two)).toEqual({ shared: 'first life' });
      await one.deleteSession('s');
      await writeBoard(one, { fresh: 'second life' });
      await two.sync?.flush();
      expect(await boardOf(two)).toEqual({ fresh: 'second life' });

      await writeBoard(two, { mine: 'from two' });
      expect(pushedBoards).toEqual([{ mine: 'from two' }]);
      await one.sync?.flush();
      expect(await boardOf(one)).toEqual({ fresh: 'second life', mine: 'from two' });
      // The ended life's snapshot went when the new life's was first written.
      const db = createDb(two.dbName);
      const snapshots = await db.meta.where('key').startsWith('sync:board:').count();
      db.close();
      expect(snapshots).toBe(1);
      await one.close();
      await two.close();
    });

    for (const newBoardFirst of [false, true]) {
      it(`board writes another device made to the old life never reach the new one (${newBoardFirst ? 'the new life has a board when they arrive' : 'they arrive first'})`, { timeout: 60_000 }, async () => {
        const server = startServer();
        const alice = uniqueUser('alice');
        const one = await pausedDevice(alice, viaServer(server));
        const two = await pausedDevice(alice, viaServer(server));
        await writeBoard(one, { shared: 'first life' });
        await two.sync?.flush();
        expect(await boardOf(two)).toEqual({ shared: 'first life' });
        // Device one deletes and re-creates the session while device two, offline, writes to the first life.
        await one.deleteSession('s');
        await one.session('s');
        if (newBoardFirst) await writeBoard(one, { fresh: 'second life' }, false);
        await one.sync?.flush();
        await writeBoard(two, { stale: 'from two' }, false);
        await two.sync?.flush();
        await one.sync?.flush();
        if (!newBoardFirst) await writeBoard(one, { fresh: 'second life' });
        await two.sync?.flush();
        const fresh = await freshDevice(server, alice);
        expect({ one: await boardOf(one), two: await boardOf(two), fresh: await boardOf(fresh) }).toEqual({ one: { fresh: 'second life' }, two: { fresh: 'second life' }, fresh: { fresh: 'second life' } });
        await one.close();
        await two.close();
        await fresh.close();
      });
    }
  });
});
