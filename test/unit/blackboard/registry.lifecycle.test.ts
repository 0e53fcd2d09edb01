/**
 * The board registry (src/blackboard/registry.ts) through its options, as
 * the store and the sync client use it: which life a board opens, when the
 * sync client is told about a stored change, where each change is said to
 * come from, how leases share and close a board, and how the lives of a
 * session deleted on another device are pruned. Two registries on one name
 * are two tabs.
 */
import * as Y from 'yjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { persistDoc } from '../../../src/blackboard/persistence.js';
import { blackboardDatabaseName, boardLivesOnDisk, deleteDocDatabase } from '../../../src/blackboard/lives.js';
import { createBoardRegistry, type BoardRegistryOptions } from '../../../src/blackboard/registry.js';
import type { BlackboardChange, TabulaError } from '../../../src/index.js';
import { REMOTE_ORIGIN } from '../../../src/blackboard/lives.js';
import type { TabTransport } from '../../../src/blackboard/tab-provider.js';
import { uniqueName, waitFor } from '../store/helpers.js';
import { writeRefusal } from './helpers.js';

/** A registry whose reported errors are collected (never thrown from a channel handler). */
function registry(name: string, options: Partial<BoardRegistryOptions> = {}) {
  const errors: TabulaError[] = [];
  const boards = createBoardRegistry({ name, peerId: uniqueName('peer'), onError: (error) => errors.push(error), ...options });
  return Object.assign(boards, { errors });
}

/** What the database of a board holds, read by a separate connection. */
async function stored(database: string): Promise<Record<string, unknown>> {
  const doc = new Y.Doc();
  const persistence = persistDoc(database, doc, { onError: () => undefined, compactAboveRows: Number.MAX_SAFE_INTEGER });
  await persistence.whenLoaded;
  const board = doc.getMap('blackboard').toJSON();
  await persistence.close();
  return board;
}


afterEach(() => {
  vi.useRealTimers();
});

describe('board registry: lives', () => {
  it('opens the life lifeOf names, in that life’s database', async () => {
    const name = uniqueName('reg');
    const tab = registry(name, { lifeOf: () => Promise.resolve('0002') });
    const lease = tab.acquire('u', 's');
    expect(tab.openLife('u', 's')).toBeUndefined();
    await lease.blackboard.whenLoaded;
    expect(tab.openLife('u', 's')).toBe('0002');
    lease.blackboard.set('k', 1);
    await lease.blackboard.flushed();
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['0002']);
    expect(await stored(blackboardDatabaseName(name, 'u', 's', '0002'))).toEqual({ k: 1 });
    await lease.release();
    // The last lease gone, nothing of the session is open here.
    expect(tab.openLife('u', 's')).toBeUndefined();
    await tab.close();
    expect(tab.errors).toEqual([]);
  });

  it('a session without a life (gone) or whose life cannot be read gives a board that refuses writes as deleted', async () => {
    const gone = registry(uniqueName('reg'), { lifeOf: () => Promise.resolve(undefined) });
    const board = gone.acquire('u', 's').blackboard;
    await board.whenLoaded;
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(gone.errors).toEqual([]);
    await gone.close();

    const failing = registry(uniqueName('reg'), { lifeOf: () => Promise.reject(new Error('db closed')) });
    const unread = failing.acquire('u', 's').blackboard;
    await unread.whenLoaded;
    expect(writeRefusal(unread)).toBe('session/not-found');
    expect(failing.errors).toEqual([expect.objectContaining({ code: 'storage/failed', message: 'Could not read which life of session "s" the blackboard belongs to.' })]);
    expect(failing.errors[0]?.cause).toEqual(new Error('db closed'));
    await failing.close();
  });

  it('a board of a life that ended here is born closed; any other life opens, whatever its name sorts as', async () => {
    const name = uniqueName('reg');
    let life = 'b';
    const tab = registry(name, { lifeOf: () => Promise.resolve(life) });
    await tab.destroy('u', 's', 'b');
    const ended = tab.acquire('u', 's').blackboard;
    await ended.whenLoaded;
    expect(writeRefusal(ended)).toBe('session/not-found');
    // 'a' sorts before the ended 'b' but is another life: a life pulled from another device may be named
    // lower than one this device ended (names are create orders on the replica that made them).
    life = 'a';
    const other = tab.acquire('u', 's').blackboard;
    await other.whenLoaded;
    expect(writeRefusal(other)).toBeNull();
    life = 'c';
    const fresh = tab.acquire('u', 't').blackboard;
    await fresh.whenLoaded;
    expect(writeRefusal(fresh)).toBeNull();
    // Ending another life does not close this one; ending this one does.
    await tab.destroy('u', 't', 'a');
    expect(writeRefusal(fresh)).toBeNull();
    await tab.destroy('u', 't', 'c');
    expect(writeRefusal(fresh)).toBe('session/not-found');
    // Every ended life stays ended, not only the latest to end.
    await tab.destroy('u', 'v', 'b');
    await tab.destroy('u', 'v', 'a');
    for (const endedLife of ['a', 'b']) {
      life = endedLife;
      const reopened = tab.acquire('u', 'v');
      await reopened.blackboard.whenLoaded;
      expect(writeRefusal(reopened.blackboard)).toBe('session/not-found');
      await reopened.release();
    }
    await tab.close();
    expect(tab.errors).toEqual([]);
  });

  it('lives ended one after another: the latest counts', async () => {
    const tab = registry(uniqueName('reg'), { lifeOf: () => Promise.resolve('b') });
    await tab.destroy('u', 's', 'a');
    await tab.destroy('u', 's', 'b');
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    expect(writeRefusal(board)).toBe('session/not-found');
    await tab.close();
  });

  it('destroy() of no life (the session did not exist) deletes nothing', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const lease = tab.acquire('u', 's');
    await lease.blackboard.whenLoaded;
    lease.blackboard.set('k', 1);
    await lease.blackboard.flushed();
    await tab.destroy('u', 's', undefined);
    expect(writeRefusal(lease.blackboard)).toBeNull();
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['']);
    await tab.close();
  });

  it('a board whose database another connection deletes (without an announcement) closes as deleted', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    await deleteDocDatabase(blackboardDatabaseName(name, 'u', 's'));
    await waitFor(() => writeRefusal(board) !== null);
    expect(writeRefusal(board)).toBe('session/not-found');
    await tab.close();
    expect(tab.errors).toEqual([]);
  });

  it('says why a board refuses: the session deleted, or the board closed', async () => {
    const tab = registry(uniqueName('reg'));
    const closed = tab.acquire('u', 'c');
    await closed.release();
    expect(() => closed.blackboard.set('k', 1)).toThrow('The blackboard of session "c" is closed; open the session again.');
    const deleted = tab.acquire('u', 'd').blackboard;
    await deleted.whenLoaded;
    await tab.destroy('u', 'd', '');
    expect(() => deleted.set('k', 1)).toThrow(
      'Session "d" of user "u" was deleted (here or in another tab), and its blackboard with it; open the session again with tabula.session() to start afresh.',
    );
    await tab.close();
  });

  it('a life ended in another tab closes this tab’s board of it, and of no other session', async () => {
    const name = uniqueName('reg');
    const here = registry(name);
    const there = registry(name);
    const deleted = there.acquire('u', 's').blackboard;
    const other = there.acquire('u', 't').blackboard;
    await Promise.all([deleted.whenLoaded, other.whenLoaded]);
    await here.destroy('u', 's', '');
    await waitFor(() => writeRefusal(deleted) !== null);
    expect(writeRefusal(deleted)).toBe('session/not-found');
    expect(writeRefusal(other)).toBeNull();
    // A board of the ended life acquired there afterwards is born closed.
    const late = there.acquire('u', 's').blackboard;
    await late.whenLoaded;
    expect(writeRefusal(late)).toBe('session/not-found');
    await Promise.all([here.close(), there.close()]);
    expect([...here.errors, ...there.errors]).toEqual([]);
  });

  it('prune() ends every life on disk but the one kept, including the one open here', async () => {
    const name = uniqueName('reg');
    let life = '';
    const tab = registry(name, { lifeOf: () => Promise.resolve(life) });
    for (const l of ['', 'a', 'b']) {
      life = l;
      const lease = tab.acquire('u', 's');
      await lease.blackboard.whenLoaded;
      lease.blackboard.set('life', l);
      await lease.blackboard.flushed();
      await lease.release();
    }
    life = 'c';
    const open = tab.acquire('u', 's').blackboard;
    await open.whenLoaded;
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['', 'a', 'b', 'c']);
    await tab.prune('u', 's', 'b');
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['b']);
    expect(writeRefusal(open)).toBe('session/not-found');
    expect(await stored(blackboardDatabaseName(name, 'u', 's', 'b'))).toEqual({ life: 'b' });
    // Pruning with nothing kept (the session is gone) ends the last one too.
    await tab.prune('u', 's', undefined);
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    await tab.close();
    expect(tab.errors).toEqual([]);
  });
});

describe('board registry: leases', () => {
  it('the board stays open while any lease holds it, and closes with the last', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const first = tab.acquire('u', 's');
    const second = tab.acquire('u', 's');
    await first.blackboard.whenLoaded;
    await first.release();
    await first.release();
    expect(writeRefusal(first.blackboard)).toBe('storage/closed');
    expect(writeRefusal(second.blackboard)).toBeNull();
    expect(tab.openLife('u', 's')).toBe('');
    await second.release();
    expect(writeRefusal(second.blackboard)).toBe('storage/closed');
    expect(tab.openLife('u', 's')).toBeUndefined();
    // A board acquired again loads what the closed one stored.
    const again = tab.acquire('u', 's');
    await again.blackboard.whenLoaded;
    expect(again.blackboard.toJSON()).toEqual({ probe: 1 });
    await tab.close();
    expect(writeRefusal(again.blackboard)).toBe('storage/closed');
    await expect(again.blackboard.flushed()).rejects.toMatchObject({ code: 'storage/closed' });
    expect(tab.errors).toEqual([]);
  });
});

describe('board registry: where changes come from, and what the sync client is told', () => {
  it('reports this tab’s writes as local, the sync client’s as remote, another tab’s as tab', async () => {
    const name = uniqueName('reg');
    const here = registry(name);
    const there = registry(name);
    const board = here.acquire('u', 's').blackboard;
    const theirs = there.acquire('u', 's').blackboard;
    const seen: BlackboardChange[] = [];
    board.observe((changes) => seen.push(...changes));
    // An app's write on the doc before the board is connected to the other tabs is still this tab's.
    board.doc.transact(() => board.doc.getMap('blackboard').set('early', 0), null);
    await Promise.all([board.whenLoaded, theirs.whenLoaded]);
    board.set('mine', 1);
    board.doc.transact(() => board.doc.getMap('blackboard').set('app', 2), 'an app origin');
    board.doc.transact(() => board.doc.getMap('blackboard').set('app-null', 3), null);
    board.doc.transact(() => board.doc.getMap('blackboard').set('server', 4), REMOTE_ORIGIN);
    theirs.set('other-tab', 5);
    await waitFor(() => board.has('other-tab'));
    expect(seen.map((c) => `${c.key}:${c.origin}`)).toEqual(['early:local', 'mine:local', 'app:local', 'app-null:local', 'server:remote', 'other-tab:tab']);
    await Promise.all([here.close(), there.close()]);
  });

  it('reports a throwing listener through onError, naming the session, and the write stands', async () => {
    const tab = registry(uniqueName('reg'));
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    const failure = new Error('listener bug');
    board.observe(() => {
      throw failure;
    });
    board.set('k', 1);
    expect(board.get('k')).toBe(1);
    expect(tab.errors).toEqual([
      expect.objectContaining({ code: 'argument/invalid', message: 'A blackboard observe() listener of session "s" threw; the change was applied and the other listeners were called.', cause: failure }),
    ]);
    await tab.close();
  });

  it('tells the sync client once per stored batch: writes made while a flush is under way share the next call', async () => {
    const name = uniqueName('reg');
    const seed = registry(name);
    const first = seed.acquire('u', 's');
    await first.blackboard.whenLoaded;
    first.blackboard.set('stored', 0);
    await first.blackboard.flushed();
    await seed.close();

    const database = blackboardDatabaseName(name, 'u', 's');
    const notices: Record<string, unknown>[] = [];
    const reads: Promise<unknown>[] = [];
    const tab = registry(name, { onLocalUpdate: () => reads.push(stored(database).then((board) => notices.push(board))) });
    const board = tab.acquire('u', 's').blackboard;
    // Loading the stored content is no change of this tab's.
    await board.whenLoaded;
    await board.flushed();
    board.set('a', 1);
    board.set('b', 2);
    board.set('c', 3);
    await waitFor(() => reads.length === 2);
    await Promise.all(reads);
    expect(notices).toEqual([expect.objectContaining({ stored: 0, a: 1 }), { stored: 0, a: 1, b: 2, c: 3 }]);
    await board.flushed();
    await tab.close();
    expect(reads).toHaveLength(2);
    expect(tab.errors).toEqual([]);
  });

  it('calls onLocalUpdate once this tab’s changes are stored, not for changes from another tab or the server', async () => {
    const name = uniqueName('reg');
    const notified: string[] = [];
    const database = blackboardDatabaseName(name, 'u', 's');
    let storedAtNotice: Record<string, unknown>[] = [];
    const here = registry(name, {
      onLocalUpdate: (userId, sessionId) => {
        notified.push(`${userId}/${sessionId}`);
        // What is stored when the sync client is told, read right after (the read is async).
        void stored(database).then((board) => (storedAtNotice = [...storedAtNotice, board]));
      },
    });
    const there = registry(name);
    const board = here.acquire('u', 's').blackboard;
    const theirs = there.acquire('u', 's').blackboard;
    await Promise.all([board.whenLoaded, theirs.whenLoaded]);
    board.set('a', 1);
    board.set('b', 2);
    await board.flushed();
    await waitFor(() => notified.length >= 1 && storedAtNotice.length === notified.length);
    expect(notified.every((n) => n === 'u/s')).toBe(true);
    expect(storedAtNotice[0]).toEqual(expect.objectContaining({ a: 1 }));
    // Changes made while a flush was on its way are covered by one more call once they are stored.
    await waitFor(() => storedAtNotice.some((b) => 'b' in b));
    const count = notified.length;
    expect(count).toBeLessThanOrEqual(2);
    board.doc.transact(() => board.doc.getMap('blackboard').set('server', 3), REMOTE_ORIGIN);
    theirs.set('other-tab', 4);
    await waitFor(() => board.has('other-tab'));
    await board.flushed();
    board.set('last', 5);
    await board.flushed();
    await waitFor(() => notified.length > count);
    expect(notified).toHaveLength(count + 1);
    await Promise.all([here.close(), there.close()]);
    expect([...here.errors, ...there.errors]).toEqual([]);
  });
});

describe('board registry: channels', () => {
  it('gives each session and life its own channel, named after the Tabula database', async () => {
    const name = uniqueName('reg');
    const channels: string[] = [];
    const transport = (channel: string): TabTransport => {
      channels.push(channel);
      return { post: () => undefined, onFrame: () => undefined, close: () => undefined };
    };
    let life = '';
    const tab = registry(name, { transport, lifeOf: () => Promise.resolve(life) });
    await tab.acquire('u', 's').blackboard.whenLoaded;
    await tab.acquire('u', 't').blackboard.whenLoaded;
    await tab.destroy('u', 's', '');
    life = 'b';
    await tab.acquire('u', 's').blackboard.whenLoaded;
    expect(channels).toEqual([
      `tabula:${name}:blackboard:${JSON.stringify(['u', 's', ''])}`,
      `tabula:${name}:blackboard:${JSON.stringify(['u', 't', ''])}`,
      `tabula:${name}:blackboard:${JSON.stringify(['u', 's', 'b'])}`,
    ]);
    await tab.close();
  });

  it('re-exchanges state every resyncIntervalMs (10 s unless set), and never with 0', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const posts = new Map<string, number>();
    const counting = (label: string) => (): TabTransport => ({
      post: () => posts.set(label, (posts.get(label) ?? 0) + 1),
      onFrame: () => undefined,
      close: () => undefined,
    });
    const tabs = [
      registry(uniqueName('reg'), { transport: counting('default') }),
      registry(uniqueName('reg'), { transport: counting('fast'), resyncIntervalMs: 1_000 }),
      registry(uniqueName('reg'), { transport: counting('off'), resyncIntervalMs: 0 }),
    ];
    await Promise.all(tabs.map((tab) => tab.acquire('u', 's').blackboard.whenLoaded));
    const start = new Map(posts);
    vi.advanceTimersByTime(9_999);
    expect(posts.get('default')).toBe(start.get('default'));
    expect((posts.get('fast') ?? 0) - (start.get('fast') ?? 0)).toBe(9);
    expect(posts.get('off')).toBe(start.get('off'));
    vi.advanceTimersByTime(1);
    expect((posts.get('default') ?? 0) - (start.get('default') ?? 0)).toBe(1);
    await Promise.all(tabs.map((tab) => tab.close()));
  });
});
