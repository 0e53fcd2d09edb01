/**
 * The stand-in board of the lazy registry (src/blackboard/lazy.ts) in the
 * corners the main lazy tests leave: transactions that nest or throw,
 * listeners stopped or throwing before the code came, leases released
 * before and after it, and the registry's own methods (destroy, prune,
 * openLife, close) before and after the load.
 */
import { describe, expect, it } from 'vitest';
import { createLazyBoardRegistry } from '../../../src/blackboard/lazy.js';
import { boardLivesOnDisk } from '../../../src/blackboard/lives.js';
import { createBoardRegistry } from '../../../src/blackboard/registry.js';
import type { TabulaError } from '../../../src/index.js';
import { uniqueName, waitFor } from '../store/helpers.js';
import { heldLoad, writeRefusal } from './helpers.js';


function lazy(name = uniqueName('lazy')) {
  const held = heldLoad();
  const errors: TabulaError[] = [];
  const registry = createLazyBoardRegistry({ name, peerId: uniqueName('peer'), onError: (error) => errors.push(error), load: held.load });
  return { name, held, errors, registry };
}

/** What the board database of u/s (first life) holds, through a plain registry. */
async function storedBoard(name: string): Promise<Record<string, unknown>> {
  const registry = createBoardRegistry({ name, peerId: uniqueName('peer'), onError: () => undefined });
  const lease = registry.acquire('u', 's');
  await lease.blackboard.whenLoaded;
  const board = lease.blackboard.toJSON();
  await registry.close();
  return board;
}


describe('lazy registry: the stand-in board', () => {
  it('a transaction reports once, a nested one joins it, and one that throws keeps and reports what it did', async () => {
    const { held, errors, registry, name } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    const batches: string[][] = [];
    board.observe((changes) => batches.push(changes.map((c) => `${c.key}=${JSON.stringify(c.value)}`)));
    board.transact(() => {
      board.set('a', 1);
      board.transact(() => board.set('b', 2));
      board.update({ c: 3 });
    });
    expect(() =>
      board.transact(() => {
        board.set('d', 4);
        throw new Error('app bug');
      }),
    ).toThrow('app bug');
    board.transact(() => undefined);
    expect(batches).toEqual([['a=1', 'b=2', 'c=3'], ['d=4']]);
    expect(board.get('missing')).toBeUndefined();
    expect(() => board.get('')).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect(() => board.has('')).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect(() => board.delete('')).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    held.release();
    await board.whenLoaded;
    expect(board.toJSON()).toEqual({ a: 1, b: 2, c: 3, d: 4 });
    await board.flushed();
    await registry.close();
    expect(await storedBoard(name)).toEqual({ a: 1, b: 2, c: 3, d: 4 });
    expect(errors).toEqual([]);
  });

  it('keeps each session’s writes to its own board while loading, and lists keys sorted', async () => {
    const { held, registry } = lazy();
    const s = registry.acquire('u', 's').blackboard;
    const t = registry.acquire('u', 't').blackboard;
    const otherUser = registry.acquire('v', 's').blackboard;
    s.update({ z: 1, a: 2 });
    expect(Object.keys(s.toJSON())).toEqual(['a', 'z']);
    expect(t.toJSON()).toEqual({});
    expect(otherUser.toJSON()).toEqual({});
    held.release();
    await Promise.all([s.whenLoaded, t.whenLoaded, otherUser.whenLoaded]);
    expect(t.toJSON()).toEqual({});
    expect(s.toJSON()).toEqual({ a: 2, z: 1 });
    await registry.close();
  });

  it('says what it refuses while loading, as the loaded board does', async () => {
    const { held, registry } = lazy();
    const lease = registry.acquire('u', 's');
    const board = lease.blackboard;
    expect(() => board.transact('x' as never)).toThrow('blackboard.transact() takes a function, got "x".');
    expect(() => board.observe(1 as never)).toThrow('blackboard.observe() takes a listener function, got number 1.');
    expect(() => board.doc).toThrow('The Y.Doc of session "s"\'s blackboard is there once `await session.blackboard.whenLoaded` has resolved (Yjs loads on the board\'s first use).');
    await Promise.race([lease.release(), Promise.resolve()]);
    expect(() => board.set('k', 1)).toThrow('The blackboard of session "s" is closed; open the session again.');
    held.release();
    await registry.close();
  });

  it('reads see copies: changing a value read back changes nothing', () => {
    const { registry } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    board.set('k', { list: [1] });
    (board.get('k') as { list: number[] }).list.push(2);
    (board.toJSON().k as { list: number[] }).list.push(3);
    expect(board.get('k')).toEqual({ list: [1] });
  });

  it('a listener stopped before the code came hears nothing after; a throwing one is reported, the others still hear', async () => {
    const { held, errors, registry } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    const seen: string[] = [];
    const stop = board.observe((changes) => seen.push(...changes.map((c) => `stopped:${c.key}`)));
    const bug = new Error('listener bug');
    board.observe(() => {
      throw bug;
    });
    board.observe((changes) => seen.push(...changes.map((c) => `kept:${c.key}`)));
    board.set('one', 1);
    stop();
    board.set('two', 2);
    expect(seen).toEqual(['stopped:one', 'kept:one', 'kept:two']);
    expect(errors.map((e) => [e.code, e.message])).toEqual([
      ['argument/invalid', 'A blackboard observe() listener of session "s" threw; the change was applied and the other listeners were called.'],
      ['argument/invalid', 'A blackboard observe() listener of session "s" threw; the change was applied and the other listeners were called.'],
    ]);
    expect(errors.map((e) => e.cause)).toEqual([bug, bug]);
    held.release();
    await board.whenLoaded;
    board.set('three', 3);
    expect(seen).toEqual(['stopped:one', 'kept:one', 'kept:two', 'kept:three']);
    await registry.close();
  });

  it('a lease released after the code came gives its board back; the other lease keeps writing', async () => {
    const { held, registry, name } = lazy();
    const first = registry.acquire('u', 's');
    const second = registry.acquire('u', 's');
    held.release();
    await first.blackboard.whenLoaded;
    expect(registry.openLife('u', 's')).toBe('');
    await first.release();
    await first.release();
    expect(writeRefusal(first.blackboard)).toBe('storage/closed');
    expect(writeRefusal(second.blackboard)).toBeNull();
    await second.blackboard.flushed();
    await second.release();
    expect(registry.openLife('u', 's')).toBeUndefined();
    await registry.close();
    expect(await storedBoard(name)).toEqual({ probe: 1 });
  });

  it('every lease released before the code came, with nothing written: no board is opened', async () => {
    const { held, registry, name } = lazy();
    const lease = registry.acquire('u', 's');
    const release = lease.release();
    held.release();
    await release;
    await expect(lease.blackboard.flushed()).rejects.toMatchObject({ code: 'storage/closed' });
    expect(registry.openLife('u', 's')).toBeUndefined();
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    await registry.close();
  });
});

describe('lazy registry: its methods before and after the load', () => {
  it('before any board: openLife is undefined, close() and a destroy of no life load nothing', async () => {
    const { held, registry } = lazy();
    expect(registry.openLife('u', 's')).toBeUndefined();
    await registry.destroy('u', 's', undefined);
    await registry.close();
    expect(held.calls()).toBe(0);
  });

  it('prune() before any board deletes every life on disk but the kept one, without loading Yjs', async () => {
    const name = uniqueName('lazy');
    let life = '';
    const writer = createBoardRegistry({ name, peerId: 'w', onError: () => undefined, lifeOf: () => Promise.resolve(life) });
    for (const l of ['', 'a', 'b']) {
      life = l;
      const lease = writer.acquire('u', 's');
      await lease.blackboard.whenLoaded;
      lease.blackboard.set('life', l);
      await lease.blackboard.flushed();
      await lease.release();
    }
    await writer.close();
    const { held, registry } = lazy(name);
    await registry.prune('u', 's', 'a');
    expect(held.calls()).toBe(0);
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual(['a']);
    await registry.close();
  });

  it('once loading, destroy() and prune() go through the loaded registry and close the open board', async () => {
    const { held, registry, name, errors } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    board.set('k', 1);
    held.release();
    await board.flushed();
    await registry.destroy('u', 's', '');
    expect(writeRefusal(board)).toBe('session/not-found');
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);

    const other = registry.acquire('u', 't').blackboard;
    await other.whenLoaded;
    other.set('k', 1);
    await other.flushed();
    await registry.prune('u', 't', undefined);
    expect(writeRefusal(other)).toBe('session/not-found');
    expect(await boardLivesOnDisk(name, 'u', 't')).toEqual([]);
    await registry.close();
    expect(errors).toEqual([]);
  });

  it('a destroy before the code came, while a write waits to be replayed: the write goes with the session', async () => {
    const { held, registry, name, errors } = lazy();
    const board = registry.acquire('u', 's').blackboard;
    board.set('doomed', 1);
    const destroyed = registry.destroy('u', 's', '');
    held.release();
    await destroyed;
    await board.whenLoaded;
    await waitFor(() => writeRefusal(board) !== null);
    expect(writeRefusal(board)).toBe('session/not-found');
    await registry.close();
    expect(await boardLivesOnDisk(name, 'u', 's')).toEqual([]);
    expect(errors).toEqual([]);
  });
});
