/**
 * The lives of a session's board (src/blackboard/lives.ts): each life has
 * its own database name, the lives left on disk are found by name, a delete
 * is announced on a channel of this Tabula database only, and a malformed
 * announcement closes nothing.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { blackboardDatabaseName, boardLivesOnDisk, deleteDocDatabase, isLifeEnded, livesChannelName } from '../../../src/blackboard/lives.js';
import { createBoardRegistry } from '../../../src/blackboard/registry.js';
import type { Blackboard, TabulaError } from '../../../src/index.js';
import { uniqueName, waitFor } from '../store/helpers.js';
import { refusesAsDeleted } from './helpers.js';

/** Creates (and closes) an empty IndexedDB database named `name`, as a board or another library would. */
function createDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(name);
    request.onsuccess = () => {
      request.result.close();
      resolve();
    };
    request.onerror = () => reject(request.error ?? new Error(`could not open ${name}`));
  });
}


afterEach(() => {
  vi.unstubAllGlobals();
});

describe('blackboardDatabaseName', () => {
  it('names the first life without a life part and every later life with one, each part URI-encoded', () => {
    expect(blackboardDatabaseName('app', 'u', 's')).toBe('app:u:s:blackboard');
    expect(blackboardDatabaseName('app', 'u', 's', '')).toBe('app:u:s:blackboard');
    expect(blackboardDatabaseName('app', 'u', 's', '0001')).toBe('app:u:s:0001:blackboard');
    // An id holding ':' cannot pass for another user's or session's board, nor for a life.
    expect(blackboardDatabaseName('app', 'u:s', 'x')).toBe('app:u%3As:x:blackboard');
    expect(blackboardDatabaseName('a:b', 'u', 's', 'l:1')).toBe('a%3Ab:u:s:l%3A1:blackboard');
  });
});

describe('boardLivesOnDisk', () => {
  it('lists the lives of this session that have a database, sorted, and nothing of other sessions or libraries', async () => {
    const name = uniqueName('lives');
    const prefix = blackboardDatabaseName(name, 'u', 's').slice(0, -'blackboard'.length);
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    for (const database of [
      blackboardDatabaseName(name, 'u', 's', 'b 2'),
      blackboardDatabaseName(name, 'u', 's'),
      blackboardDatabaseName(name, 'u', 's', 'a1'),
      // Not lives of u/s: another session whose id starts the same, another user, another suffix,
      // a name with an empty or ':'-holding life part (no life of this session is named so).
      blackboardDatabaseName(name, 'u', 's2'),
      blackboardDatabaseName(name, 'u2', 's'),
      `${prefix}a1:other`,
      `${prefix}a1-exported-copy`,
      `${prefix}:blackboard`,
      `${prefix}x:y:blackboard`,
      `blackboard:${prefix}`,
    ]) {
      await createDatabase(database);
    }
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['', 'a1', 'b 2']);
    expect(await boardLivesOnDisk(name, 'u', 's2')).toEqual(['']);
    await deleteDocDatabase(blackboardDatabaseName(name, 'u', 's'));
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['a1', 'b 2']);
  });

  it('lists nothing where the browser cannot list databases, or has no IndexedDB', async () => {
    const name = uniqueName('lives');
    await createDatabase(blackboardDatabaseName(name, 'u', 's'));
    vi.stubGlobal('indexedDB', { databases: undefined });
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    vi.stubGlobal('indexedDB', undefined);
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
  });
});

describe('deleteDocDatabase', () => {
  it('rejects with the error IndexedDB gives, or one naming the database when it gives none', async () => {
    const failing = (error: DOMException | null) => ({
      deleteDatabase() {
        const request: { error: DOMException | null; onsuccess?: () => void; onerror?: () => void; onblocked?: () => void } = { error };
        queueMicrotask(() => request.onerror?.());
        return request;
      },
    });
    const cause = new DOMException('disk gone', 'UnknownError');
    vi.stubGlobal('indexedDB', failing(cause));
    await expect(deleteDocDatabase('app:u:s:blackboard')).rejects.toBe(cause);
    vi.stubGlobal('indexedDB', failing(null));
    await expect(deleteDocDatabase('app:u:s:blackboard')).rejects.toThrow('Could not delete app:u:s:blackboard');
  });
});

describe('the lives channel', () => {
  it('is named after the Tabula database, so a delete in one database closes no board of another', async () => {
    expect(livesChannelName('app')).toBe('tabula:app:blackboard-lives');
    const errors: TabulaError[] = [];
    const onError = (error: TabulaError) => errors.push(error);
    const [first, second] = [uniqueName('lives'), uniqueName('lives')];
    const here = createBoardRegistry({ name: first, peerId: 'a', onError });
    const there = createBoardRegistry({ name: first, peerId: 'b', onError });
    const elsewhere = createBoardRegistry({ name: second, peerId: 'c', onError });
    const [mine, theirs, unrelated] = [here, there, elsewhere].map((registry) => registry.acquire('u', 's').blackboard) as [Blackboard, Blackboard, Blackboard];
    await Promise.all([mine.whenLoaded, theirs.whenLoaded, unrelated.whenLoaded]);
    unrelated.set('kept', 1);
    await here.destroy('u', 's', '');
    // The other tab of the same database hears the delete; once it has, any stray announcement has arrived too.
    await waitFor(() => refusesAsDeleted(theirs));
    unrelated.set('still', 2);
    expect(unrelated.toJSON()).toEqual({ kept: 1, still: 2 });
    await unrelated.flushed();
    expect(errors).toEqual([]);
    await Promise.all([here.close(), there.close(), elsewhere.close()]);
  });

  it('reports a malformed announcement as schema/invalid and closes nothing', async () => {
    const name = uniqueName('lives');
    const errors: TabulaError[] = [];
    const registry = createBoardRegistry({ name, peerId: 'a', onError: (error) => errors.push(error) });
    const board = registry.acquire('u', 's').blackboard;
    await board.whenLoaded;
    const channel = new BroadcastChannel(livesChannelName(name));
    const malformed = [
      'u/s',
      { userId: 'u', sessionId: 's', life: '' },
      { v: 2, userId: 'u', sessionId: 's', life: '' },
      { v: 1, userId: 1, sessionId: 's', life: '' },
      { v: 1, userId: 'u', sessionId: null, life: '' },
      { v: 1, userId: 'u', sessionId: 's' },
    ];
    for (const message of malformed) channel.postMessage(message);
    await waitFor(() => errors.length === malformed.length);
    expect(errors.every((error) => error.code === 'schema/invalid' && error.message.includes('{ v: 1, userId, sessionId, life }'))).toBe(true);
    board.set('open', true);
    expect(board.get('open')).toBe(true);
    // A well-formed one does close it.
    channel.postMessage({ v: 1, userId: 'u', sessionId: 's', life: '' });
    await waitFor(() => refusesAsDeleted(board));
    channel.close();
    expect(errors).toHaveLength(malformed.length);
    await registry.close();
  });
});

describe('isLifeEnded', () => {
  it('accepts exactly { v: 1, userId, sessionId, life } with string ids', () => {
    expect(isLifeEnded({ v: 1, userId: 'u', sessionId: 's', life: '' })).toBe(true);
    expect(isLifeEnded({ v: 1, userId: '', sessionId: '', life: '0001', extra: true })).toBe(true);
    for (const raw of [
      null,
      undefined,
      'x',
      1,
      [],
      {},
      { v: '1', userId: 'u', sessionId: 's', life: '' },
      { v: 1, sessionId: 's', life: '' },
      { v: 1, userId: 'u', life: '' },
      { v: 1, userId: 'u', sessionId: 's' },
      { v: 1, userId: 'u', sessionId: 's', life: 1 },
      { v: 1, userId: ['u'], sessionId: 's', life: '' },
      { v: 1, userId: 'u', sessionId: 2, life: '' },
    ]) {
      expect(isLifeEnded(raw), JSON.stringify(raw) ?? typeof raw).toBe(false);
    }
  });
});
