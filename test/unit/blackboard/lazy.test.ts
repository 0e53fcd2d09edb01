/**
 * The lazily loaded blackboard (src/blackboard/lazy.ts): Yjs loads on the
 * first use of a board, and while it loads the board keeps its contract.
 * The load is held back by hand here, so every test runs inside the window
 * a slow chunk fetch would open: writes are checked, seen, reported, then
 * replayed into the Y.Doc and durable once flushed() resolves.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { createLazyBoardRegistry, type BoardCode } from '../../../src/blackboard/lazy.js';
import { blackboardDatabaseName } from '../../../src/blackboard/lives.js';
import { createBoardRegistry } from '../../../src/blackboard/registry.js';
import type { BlackboardChange } from '../../../src/index.js';
import { freshTabula, uniqueName, waitFor } from '../store/helpers.js';
import { heldLoad } from './helpers.js';


/** What the registries reported; every test expects nothing (a throwing onError would crash the runner from a channel's message handler). */
let reported: Error[] = [];
beforeEach(() => {
  reported = [];
});
afterEach(() => {
  expect(reported).toEqual([]);
});

const registryOptions = (name: string) => ({ name, peerId: `peer-${Math.random()}`, onError: (error: Error) => void reported.push(error) });

async function storedBoard(name: string): Promise<Record<string, unknown>> {
  const registry = createBoardRegistry(registryOptions(name));
  const lease = registry.acquire('u', 's');
  await lease.blackboard.whenLoaded;
  const board = lease.blackboard.toJSON();
  await registry.close();
  return board;
}

describe('lazy blackboard registry', () => {
  it('loads nothing until a board is acquired, and loads once', async () => {
    const held = heldLoad();
    const registry = createLazyBoardRegistry({ ...registryOptions(uniqueName()), load: held.load });
    expect(held.calls()).toBe(0);
    const a = registry.acquire('u', 's');
    const b = registry.acquire('u', 't');
    expect(held.calls()).toBe(1);
    held.release();
    await Promise.all([a.blackboard.whenLoaded, b.blackboard.whenLoaded]);
    expect(held.calls()).toBe(1);
    await registry.close();
  });

  it('while loading: writes are read back, reported once to every handle, replayed in order, durable after flushed()', async () => {
    const name = uniqueName();
    const held = heldLoad();
    const registry = createLazyBoardRegistry({ ...registryOptions(name), load: held.load });
    const a = registry.acquire('u', 's').blackboard;
    const b = registry.acquire('u', 's').blackboard;
    const seen: string[] = [];
    b.observe((changes: BlackboardChange[]) => seen.push(changes.map((c) => `${c.origin}:${c.key}=${JSON.stringify(c.value)}`).join(',')));
    a.set('plan', ['flights']);
    a.update({ budget: 1200, city: 'Lisbon' });
    a.transact(() => {
      a.set('city', 'Porto');
      a.delete('budget');
    });
    a.delete('missing');
    expect(b.toJSON()).toEqual({ city: 'Porto', plan: ['flights'] });
    expect(b.get('plan')).toEqual(['flights']);
    expect(b.has('budget')).toBe(false);
    expect(b.keys()).toEqual(['city', 'plan']);
    expect(seen).toEqual(['local:plan=["flights"]', 'local:budget=1200,local:city="Lisbon"', 'local:budget=undefined,local:city="Porto"']);
    expect(() => a.doc).toThrow(expect.objectContaining({ code: 'blackboard/loading' }) as Error);

    held.release();
    await a.whenLoaded;
    expect(a.doc).toBeInstanceOf(Y.Doc);
    expect(a.toJSON()).toEqual({ city: 'Porto', plan: ['flights'] });
    // The listener moved onto the real board: it hears later writes once, and did not hear the replay again.
    b.set('after', true);
    expect(seen).toHaveLength(4);
    await a.flushed();
    await registry.close();
    expect(await storedBoard(name)).toEqual({ after: true, city: 'Porto', plan: ['flights'] });
  });

  it('while loading: refuses what the loaded board refuses, with the same codes, and changes nothing', async () => {
    const held = heldLoad();
    const registry = createLazyBoardRegistry({ ...registryOptions(uniqueName()), load: held.load });
    const board = registry.acquire('u', 's').blackboard;
    expect(() => board.set('', 1)).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect(() => board.set('k', (() => 1) as never)).toThrow(expect.objectContaining({ code: 'schema/invalid' }) as Error);
    expect(() => board.update([] as never)).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect(() => board.update({ ok: 1, bad: undefined as never })).toThrow(expect.objectContaining({ code: 'schema/invalid' }) as Error);
    expect(() => board.transact('x' as never)).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect(() => board.observe(null as never)).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect(board.toJSON()).toEqual({});
    held.release();
    await board.whenLoaded;
    expect(board.toJSON()).toEqual({});
    await registry.close();
  });

  it('a board released before the code came: its writes are still stored, and it refuses more', async () => {
    const name = uniqueName();
    const held = heldLoad();
    const registry = createLazyBoardRegistry({ ...registryOptions(name), load: held.load });
    const lease = registry.acquire('u', 's');
    lease.blackboard.set('kept', 1);
    await Promise.race([lease.release(), Promise.resolve()]);
    expect(() => lease.blackboard.set('late', 2)).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
    held.release();
    await expect(lease.blackboard.flushed()).rejects.toMatchObject({ code: 'storage/closed' });
    await registry.close();
    expect(await storedBoard(name)).toEqual({ kept: 1 });
  });

  it('destroy() without a board ever opened here deletes the database and closes the board in other tabs, without loading Yjs', async () => {
    const name = uniqueName();
    const other = createBoardRegistry(registryOptions(name));
    const theirs = other.acquire('u', 's');
    await theirs.blackboard.whenLoaded;
    theirs.blackboard.set('secret', 1);
    await theirs.blackboard.flushed();
    const held = heldLoad();
    const registry = createLazyBoardRegistry({ ...registryOptions(name), load: held.load });
    await registry.destroy('u', 's', '');
    expect(held.calls()).toBe(0);
    await waitFor(() => {
      try {
        theirs.blackboard.set('late', 1);
        return false;
      } catch (error) {
        return (error as { code?: string }).code === 'session/not-found';
      }
    });
    const names = (await indexedDB.databases()).map((db) => db.name);
    expect(names).not.toContain(blackboardDatabaseName(name, 'u', 's'));
    await Promise.all([registry.close(), other.close()]);
  });

  it('through openTabula: a board written right after session() reaches another tab and survives a reopen', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const inA = await tabA.session('s');
    const inB = await tabB.session('s');
    inA.blackboard.set('from', 'A');
    await inA.blackboard.flushed();
    await inB.blackboard.whenLoaded;
    await waitFor(() => inB.blackboard.get('from') === 'A');
    await Promise.all([tabA.close(), tabB.close()]);
    const again = await freshTabula({ name });
    const reopened = await again.session('s');
    await reopened.blackboard.whenLoaded;
    expect(reopened.blackboard.toJSON()).toEqual({ from: 'A' });
    expect([...tabA.reported, ...tabB.reported, ...again.reported]).toEqual([]);
    await again.close();
  });

  it('a failed load is reported, and the next use of a board loads again and keeps what was written meanwhile', async () => {
    const name = uniqueName();
    const failures: Error[] = [];
    let fail = true;
    const load: BoardCode = async () => {
      if (fail) throw new Error('chunk fetch failed');
      return import('../../../src/blackboard/registry.js');
    };
    const registry = createLazyBoardRegistry({ ...registryOptions(name), onError: (error) => failures.push(error), load });
    const first = registry.acquire('u', 's').blackboard;
    first.set('early', 1);
    await expect(first.whenLoaded).rejects.toMatchObject({ code: 'storage/failed' });
    expect(failures).toEqual([expect.objectContaining({ code: 'storage/failed' })]);
    fail = false;
    const second = registry.acquire('u', 's').blackboard;
    await second.whenLoaded;
    expect(second.toJSON()).toEqual({ early: 1 });
    second.set('late', 2);
    await second.flushed();
    await registry.close();
    expect(await storedBoard(name)).toEqual({ early: 1, late: 2 });
  });
});
