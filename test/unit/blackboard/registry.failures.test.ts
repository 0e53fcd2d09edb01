/**
 * The board registry (src/blackboard/registry.ts) where things fail or race:
 * IndexedDB refusing a flush or a database delete (injected, since
 * fake-indexeddb never fails on its own), a page without BroadcastChannel,
 * an end of life announced by another tab, a board released after its
 * session was deleted, and a prune that runs before the open board's
 * database is listed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { blackboardDatabaseName, boardLivesOnDisk, deleteDocDatabase, livesChannelName } from '../../../src/blackboard/lives.js';
import { createBoardRegistry, type BoardRegistryOptions } from '../../../src/blackboard/registry.js';
import type { LifeEnded } from '../../../src/blackboard/lives.js';
import type { TabulaError } from '../../../src/index.js';
import type { TabTransport } from '../../../src/blackboard/tab-provider.js';
import { uniqueName, waitFor } from '../store/helpers.js';
import { writeRefusal } from './helpers.js';

/** A registry whose reported errors are collected (never thrown from a channel handler). */
function registry(name: string, options: Partial<BoardRegistryOptions> = {}) {
  const errors: TabulaError[] = [];
  const boards = createBoardRegistry({ name, peerId: uniqueName('peer'), onError: (error) => errors.push(error), ...options });
  return Object.assign(boards, { errors });
}

/** Polls an async condition every few milliseconds, for at most 20 s. */
async function until(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Makes `indexedDB.deleteDatabase` fail with `cause`, after letting the first `pass` calls through. */
function failDeletes(cause: Error, pass = 0): void {
  const original = indexedDB.deleteDatabase.bind(indexedDB);
  let calls = 0;
  vi.spyOn(indexedDB, 'deleteDatabase').mockImplementation((name) => {
    calls += 1;
    if (calls <= pass) return original(name);
    const request = { error: cause, onsuccess: null, onerror: null, onblocked: null } as unknown as IDBOpenDBRequest;
    setTimeout(() => (request.onerror as (() => void) | null)?.());
    return request;
  });
}

/** Makes the strict-durability transactions (the flush barriers) on `database` throw, `times` times. */
function failFlushes(database: string, times: number): { attempts: () => number } {
  const { transaction } = Object.getOwnPropertyDescriptors(IDBDatabase.prototype);
  const original = transaction?.value as IDBDatabase['transaction'];
  let attempts = 0;
  vi.spyOn(IDBDatabase.prototype, 'transaction').mockImplementation(function (this: IDBDatabase, stores, mode, options) {
    if (this.name === database && options?.durability === 'strict') {
      attempts += 1;
      if (attempts <= times) throw new DOMException('injected failure', 'UnknownError');
    }
    return original.call(this, stores, mode, options);
  });
  return { attempts: () => attempts };
}

/** Announces the end of a life as another tab of Tabula database `name` does. */
function announceEnd(name: string, ended: LifeEnded): void {
  const channel = new BroadcastChannel(livesChannelName(name));
  channel.postMessage(ended);
  channel.close();
}

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe('board registry: IndexedDB failures', () => {
  it('a flush IndexedDB refuses rejects with storage/failed, naming the session; the next one works', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    const failure = failFlushes(blackboardDatabaseName(name, 'u', 's'), 1);
    board.set('k', 1);
    const refused = await board.flushed().catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'storage/failed', message: 'Could not make the blackboard of session "s" durable.' });
    expect((refused as TabulaError).cause).toMatchObject({ name: 'UnknownError' });
    await board.flushed();
    expect(failure.attempts()).toBe(2);
    await tab.close();
    expect(tab.errors).toEqual([]);
  });

  it('a change whose flush failed does not stop the sync client from hearing of the next one', async () => {
    const name = uniqueName('reg');
    const notified: string[] = [];
    const tab = registry(name, { onLocalUpdate: (userId, sessionId) => notified.push(`${userId}/${sessionId}`) });
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    const failure = failFlushes(blackboardDatabaseName(name, 'u', 's'), 1);
    board.set('a', 1);
    await waitFor(() => failure.attempts() === 1);
    // The failed flush told no one; its rejection is handled within the same turn as the throw.
    expect(notified).toEqual([]);
    board.set('b', 2);
    await waitFor(() => notified.length === 1);
    expect(notified).toEqual(['u/s']);
    await tab.close();
  });

  it('a deleted board whose own database delete fails reports it, with its cause', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    const cause = new Error('delete refused');
    // The first delete (another connection's, below) goes through; the registry's own delete then fails.
    failDeletes(cause, 1);
    await deleteDocDatabase(blackboardDatabaseName(name, 'u', 's'));
    await waitFor(() => tab.errors.length > 0);
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(tab.errors.map((e) => [e.code, e.message, e.cause])).toEqual([['storage/failed', 'Could not close the deleted blackboard of session "s".', cause]]);
    await tab.close();
  });

  it('an end announced by another tab whose database delete fails here is reported, with its cause', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    const cause = new Error('delete refused');
    failDeletes(cause);
    announceEnd(name, { v: 1, userId: 'u', sessionId: 's', life: '' });
    await waitFor(() => tab.errors.length > 0);
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(tab.errors.map((e) => [e.code, e.message, e.cause])).toEqual([['storage/failed', 'Could not close the deleted blackboard of session "s".', cause]]);
    await tab.close();
  });
});

describe('board registry: ends of life and closes', () => {
  it('an end announced by another tab deletes the database this tab opened (an orphan, if it opened it after the delete)', async () => {
    const name = uniqueName('reg');
    const tab = registry(name);
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    board.set('k', 1);
    await board.flushed();
    announceEnd(name, { v: 1, userId: 'u', sessionId: 's', life: '' });
    await until(async () => (await boardLivesOnDisk(name, 'u', 's')).length === 0);
    expect(writeRefusal(board)).toBe('session/not-found');
    await tab.close();
    expect(tab.errors).toEqual([]);
  });

  it('a board released after its session was deleted still says deleted; a later close() changes nothing', async () => {
    const tab = registry(uniqueName('reg'));
    const first = tab.acquire('u', 's');
    const second = tab.acquire('u', 's');
    await first.blackboard.whenLoaded;
    await tab.destroy('u', 's', '');
    await first.release();
    await second.release();
    await tab.close();
    for (const lease of [first, second]) {
      expect(writeRefusal(lease.blackboard)).toBe('session/not-found');
      await expect(lease.blackboard.flushed()).rejects.toMatchObject({ code: 'session/not-found' });
    }
  });

  it('works without BroadcastChannel (a transport given): boards open, store, and end', async () => {
    vi.stubGlobal('BroadcastChannel', undefined);
    const name = uniqueName('reg');
    const transport = (): TabTransport => ({ post: () => undefined, onFrame: () => undefined, close: () => undefined });
    const tab = registry(name, { transport });
    const board = tab.acquire('u', 's').blackboard;
    await board.whenLoaded;
    board.set('k', 1);
    await board.flushed();
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['']);
    await tab.destroy('u', 's', '');
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    await tab.close();
    expect(tab.errors).toEqual([]);
  });

  it('prune() ends the board open here even before its database is listed', async () => {
    const name = uniqueName('reg');
    let learnLife!: (life: string) => void;
    const life = new Promise<string>((resolve) => (learnLife = resolve));
    const tab = registry(name, { lifeOf: () => life });
    const board = tab.acquire('u', 's').blackboard;
    learnLife('x');
    // The life is known (and its database opening) a few microtasks later; IndexedDB lists it a task later.
    for (let turn = 0; turn < 100 && tab.openLife('u', 's') === undefined; turn += 1) await Promise.resolve();
    expect(tab.openLife('u', 's')).toBe('x');
    await tab.prune('u', 's', undefined);
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    await tab.close();
    expect(tab.errors).toEqual([]);
  });
});
