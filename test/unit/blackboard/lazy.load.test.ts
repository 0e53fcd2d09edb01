/**
 * What the load of the board code (src/blackboard/lazy.ts) does with the
 * boards handed out before it: a board every handle let go of is stored,
 * or goes with its session if that was deleted meanwhile, without failing
 * the other boards; empty writes open nothing; once loaded, every method
 * is the real board's; destroy, prune and close before, during and after
 * the load, and after a load that failed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLazyBoardRegistry, type BoardCode } from '../../../src/blackboard/lazy.js';
import { blackboardDatabaseName, boardLivesOnDisk } from '../../../src/blackboard/lives.js';
import { BLACKBOARD_MAP } from '../../../src/blackboard/validate.js';
import { createBoardRegistry, type BoardRegistryOptions } from '../../../src/blackboard/registry.js';
import type { BlackboardChange, TabulaError } from '../../../src/index.js';
import { uniqueName } from '../store/helpers.js';
import { heldLoad, writeRefusal } from './helpers.js';

/** A lazy registry whose load is held until `held.release()`; reported errors are collected. */
function lazy(options: Partial<BoardRegistryOptions> & { load?: BoardCode } = {}) {
  const held = heldLoad();
  const errors: TabulaError[] = [];
  const name = options.name ?? uniqueName('lazy');
  const registry = createLazyBoardRegistry({ peerId: uniqueName('peer'), onError: (error) => errors.push(error), load: held.load, ...options, name });
  return { name, held, errors, registry };
}

/** A plain (loaded) registry on `name`: another tab. */
function tab(name: string) {
  const errors: TabulaError[] = [];
  const registry = createBoardRegistry({ name, peerId: uniqueName('peer'), onError: (error) => errors.push(error) });
  return Object.assign(registry, { errors });
}

/** What the board database of u/s (first life) holds, through a plain registry. */
async function storedBoard(name: string): Promise<Record<string, unknown>> {
  const reader = tab(name);
  const lease = reader.acquire('u', 's');
  await lease.blackboard.whenLoaded;
  const board = lease.blackboard.toJSON();
  await reader.close();
  return board;
}

/** Polls an async condition every few milliseconds, for at most 20 s. */
async function until(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Records every IndexedDB transaction opened (database, mode, durability); `fail` makes matching ones throw. */
function watchTransactions(fail?: (database: string, durability: string | undefined) => boolean) {
  const opened: string[] = [];
  const { transaction } = Object.getOwnPropertyDescriptors(IDBDatabase.prototype);
  const original = transaction?.value as IDBDatabase['transaction'];
  vi.spyOn(IDBDatabase.prototype, 'transaction').mockImplementation(function (this: IDBDatabase, stores, mode, options) {
    opened.push(`${this.name} ${mode ?? 'readonly'} ${options?.durability ?? 'default'}`);
    if (fail?.(this.name, options?.durability)) throw new DOMException('injected failure', 'UnknownError');
    return original.call(this, stores, mode, options);
  });
  return opened;
}

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe('lazy registry: boards let go of before the code came', () => {
  it('a session deleted before the code came: its writes go with it, and the other boards still load', async () => {
    // Before the fix, the rejected flush of the deleted board rejected the whole load: every other board's
    // whenLoaded and flushed() said session/not-found forever, and close() left the loaded registry open.
    const { name, held, errors, registry } = lazy({ lifeOf: (_userId, sessionId) => Promise.resolve(sessionId === 's' ? undefined : '') });
    const gone = registry.acquire('u', 's');
    gone.blackboard.set('doomed', 1);
    const other = registry.acquire('u', 't').blackboard;
    other.set('kept', 2);
    const released = gone.release();
    held.release();
    await released;
    await other.whenLoaded;
    await other.flushed();
    expect(registry.openLife('u', 's')).toBeUndefined();
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    await registry.close();
    expect(writeRefusal(other)).toBe('storage/closed');
    expect(errors).toEqual([]);
  });

  it('release() resolves once its writes are durable (a strict-durability commit), and the board is given back', async () => {
    const { name, held, errors, registry } = lazy();
    const opened = watchTransactions();
    const lease = registry.acquire('u', 's');
    lease.blackboard.set('kept', 1);
    const released = lease.release();
    held.release();
    await released;
    expect(opened).toContain(`${blackboardDatabaseName(name, 'u', 's')} readwrite strict`);
    // Nothing of it is left to load here.
    await lease.blackboard.whenLoaded;
    expect(registry.openLife('u', 's')).toBeUndefined();
    await registry.close();
    expect(await storedBoard(name)).toEqual({ kept: 1 });
    expect(errors).toEqual([]);
  });

  it('writes that cannot be made durable are reported, naming the session', async () => {
    const { name, held, errors, registry } = lazy();
    const database = blackboardDatabaseName(name, 'u', 's');
    watchTransactions((db, durability) => db === database && durability === 'strict');
    const lease = registry.acquire('u', 's');
    lease.blackboard.set('kept', 1);
    const released = lease.release();
    held.release();
    await released;
    expect(errors.map((e) => [e.code, e.message])).toEqual([['storage/failed', 'Could not make the blackboard of session "s" durable.']]);
    expect(errors[0]?.cause).toMatchObject({ name: 'UnknownError' });
    expect(registry.openLife('u', 's')).toBeUndefined();
    await registry.close();
  });

  it('empty writes change nothing: listeners hear nothing, and a board let go of opens no database', async () => {
    const { name, held, errors, registry } = lazy();
    const lease = registry.acquire('u', 's');
    const seen: BlackboardChange[][] = [];
    lease.blackboard.observe((changes) => seen.push(changes));
    lease.blackboard.update({});
    lease.blackboard.transact(() => lease.blackboard.update({}));
    lease.blackboard.delete('missing');
    expect(seen).toEqual([]);
    const released = lease.release();
    held.release();
    await released;
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    expect(registry.openLife('u', 's')).toBeUndefined();
    await registry.close();
    expect(errors).toEqual([]);
  });
});

describe('lazy registry: a stand-in board once the code is in', () => {
  it('deletes, transactions and flushes go to the real board', async () => {
    const { name, held, errors, registry } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    board.update({ a: 1, b: 2 });
    held.release();
    await board.whenLoaded;
    const batches: string[][] = [];
    board.observe((changes) => batches.push(changes.map((c) => `${c.key}=${JSON.stringify(c.value)}`)));
    board.delete('a');
    board.transact(() => {
      board.set('c', 3);
      board.set('d', 4);
    });
    expect(batches).toEqual([['a=undefined'], ['c=3', 'd=4']]);
    await board.flushed();
    await registry.close();
    expect(await storedBoard(name)).toEqual({ b: 2, c: 3, d: 4 });
    expect(errors).toEqual([]);
  });

  it('flushed() of a deleted session says so, before and after the lease is released', async () => {
    const { held, errors, registry } = lazy();
    const lease = registry.acquire('u', 's');
    held.release();
    await lease.blackboard.whenLoaded;
    await registry.destroy('u', 's', '');
    await expect(lease.blackboard.flushed()).rejects.toMatchObject({ code: 'session/not-found' });
    await lease.release();
    await expect(lease.blackboard.flushed()).rejects.toMatchObject({ code: 'session/not-found' });
    await registry.close();
    expect(errors).toEqual([]);
  });
});

describe('lazy registry: destroy, prune and close around the load', () => {
  it('destroy() of no life before the code came deletes nothing', async () => {
    const name = uniqueName('lazy');
    const other = tab(name);
    const theirs = other.acquire('u', 's').blackboard;
    await theirs.whenLoaded;
    theirs.set('k', 1);
    await theirs.flushed();
    const { registry, held } = lazy({ name });
    await registry.destroy('u', 's', undefined);
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['']);
    expect(writeRefusal(theirs)).toBeNull();
    expect(held.calls()).toBe(0);
    await Promise.all([registry.close(), other.close()]);
    expect(other.errors).toEqual([]);
  });

  it('destroy() before the code came is announced: a board another tab opens afterwards is born closed', async () => {
    const name = uniqueName('lazy');
    const { registry, held } = lazy({ name });
    const other = tab(name);
    await registry.destroy('u', 's', '');
    // The announcement crosses a BroadcastChannel: until it arrives, the other tab may still open the life.
    await until(async () => {
      const lease = other.acquire('u', 's');
      await lease.blackboard.whenLoaded;
      const refused = writeRefusal(lease.blackboard) === 'session/not-found';
      await lease.release();
      return refused;
    });
    expect(held.calls()).toBe(0);
    await Promise.all([registry.close(), other.close()]);
    expect(other.errors).toEqual([]);
  });

  it('destroy() before the code came, where there is no BroadcastChannel, still deletes the database', async () => {
    const name = uniqueName('lazy');
    const writer = tab(name);
    const lease = writer.acquire('u', 's');
    await lease.blackboard.whenLoaded;
    lease.blackboard.set('k', 1);
    await lease.blackboard.flushed();
    await writer.close();
    vi.stubGlobal('BroadcastChannel', undefined);
    const { registry, held } = lazy({ name });
    await registry.destroy('u', 's', '');
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    expect(held.calls()).toBe(0);
    await registry.close();
  });

  it('prune() while the code loads waits for it: a board written meanwhile ends with its session', async () => {
    const { name, held, errors, registry } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    board.set('k', 1);
    const pruned = registry.prune('u', 's', undefined);
    // Nothing is on disk yet: a prune that did not wait for the load would find nothing to end.
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    held.release();
    await pruned;
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    await registry.close();
    expect(errors).toEqual([]);
  });

  it('close() closes the boards of the loaded registry', async () => {
    const { held, registry } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    held.release();
    await board.whenLoaded;
    expect(writeRefusal(board)).toBeNull();
    await registry.close();
    expect(writeRefusal(board)).toBe('storage/closed');
  });

  it('after a failed load: reported with its cause, release() and close() resolve, whenLoaded read again loads again', async () => {
    const name = uniqueName('lazy');
    const cause = new Error('chunk fetch failed');
    let fail = true;
    const { registry, errors } = lazy({
      name,
      load: async () => {
        if (fail) throw cause;
        return import('../../../src/blackboard/registry.js');
      },
    });
    const first = registry.acquire('u', 's');
    first.blackboard.set('early', 1);
    const dropped = registry.acquire('u', 't');
    // One promise per attempt, whoever reads it (React's use() needs the same promise on every render).
    expect(first.blackboard.whenLoaded).toBe(first.blackboard.whenLoaded);
    await expect(first.blackboard.whenLoaded).rejects.toMatchObject({ code: 'storage/failed' });
    expect(errors.map((e) => [e.code, e.message, e.cause])).toEqual([
      ['storage/failed', 'Could not load the blackboard code (Yjs); check that the bundle serves its lazy chunk.', cause],
    ]);
    // Read again while the load still fails: it tries again (reported again), and fails again.
    await expect(first.blackboard.whenLoaded).rejects.toMatchObject({ code: 'storage/failed' });
    expect(errors).toHaveLength(2);
    await dropped.release();
    fail = false;
    // Read again once the chunk is served: it loads, and the write made before is in the Y.Doc.
    await first.blackboard.whenLoaded;
    expect(first.blackboard.whenLoaded).toBe(first.blackboard.whenLoaded);
    expect(first.blackboard.doc.getMap(BLACKBOARD_MAP).get('early')).toBe(1);
    await first.blackboard.flushed();
    expect(registry.openLife('u', 's')).toBe('');
    await registry.close();
    expect(writeRefusal(first.blackboard)).toBe('storage/closed');
    expect(await storedBoard(name)).toEqual({ early: 1 });

    fail = true;
    const never = lazy({ load: () => Promise.reject(cause) });
    await expect(never.registry.acquire('u', 's').blackboard.flushed()).rejects.toMatchObject({ code: 'storage/failed' });
    await never.registry.close();
  });
});
