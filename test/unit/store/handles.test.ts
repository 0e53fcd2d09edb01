/**
 * Session handles are released without the app remembering to close them
 * (issue 10 #13): a handle the app dropped is garbage-collected with what it
 * holds, while one whose blackboard the app still holds stays usable, and
 * tabula.close() closes the handles still alive.
 *
 * Needs a garbage collector it can call: Node's, reached through V8 flags.
 * The browser project skips it.
 */
import { describe, expect, it } from 'vitest';
import type { TabulaError } from '../../../src/index.js';
import { createHandleTracker, releaseBoth } from '../../../src/store/handles.js';
import type { Session } from '../../../src/store/session/index.js';
import { freshTabula } from './helpers.js';

const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';

async function collector(): Promise<() => void> {
  // Kept out of Vite's static analysis: these modules exist only in Node.
  const v8 = (await import(/* @vite-ignore */ ['node', 'v8'].join(':'))) as { setFlagsFromString(flags: string): void };
  const vm = (await import(/* @vite-ignore */ ['node', 'vm'].join(':'))) as { runInNewContext(code: string): unknown };
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** Collects garbage until `done()` holds; FinalizationRegistry callbacks run between the rounds. */
async function collectUntil(gc: () => void, done: () => boolean, rounds = 50): Promise<boolean> {
  for (let round = 0; round < rounds && !done(); round++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return done();
}

describe.skipIf(!isNode)('session handles are held weakly', () => {
  it('a dropped handle is collected; its blackboard lease and watcher go with it', { timeout: 60_000 }, async () => {
    const gc = await collector();
    const tabula = await freshTabula();
    const refs: WeakRef<object>[] = [];
    const open = async () => {
      for (let i = 0; i < 50; i++) refs.push(new WeakRef(await tabula.session('s')));
    };
    await open();
    await collectUntil(gc, () => refs.every((ref) => ref.deref() === undefined));
    // Under Vitest the most recent handle can stay reachable from the runner's own async bookkeeping
    // (in a plain Node script all 50 go); before the fix all 50 stayed until tabula.close().
    expect(refs.filter((ref) => ref.deref() !== undefined).length).toBeLessThanOrEqual(1);
    // The session itself is untouched, and a new handle works.
    const again = await tabula.session('s');
    again.blackboard.set('k', 1);
    await again.append({ role: 'user', content: 'still here' });
    expect(await again.messageCount()).toBe(1);
    await tabula.close();
  });

  it('a handle whose blackboard the app keeps stays alive and writable; close() still closes it', { timeout: 60_000 }, async () => {
    const gc = await collector();
    const tabula = await freshTabula();
    let handleRef!: WeakRef<object>;
    const keepBoard = async () => {
      const handle = await tabula.session('s');
      handleRef = new WeakRef(handle);
      return handle.blackboard;
    };
    const board = await keepBoard();
    await collectUntil(gc, () => false, 5);
    expect(handleRef.deref()).toBeDefined();
    board.set('plan', 'kept');
    expect(board.get('plan')).toBe('kept');
    await tabula.close();
    expect(() => board.set('plan', 'late')).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
  });
});

/**
 * The tracker itself (src/store/handles.ts), with stand-in sessions whose close and release are
 * recorded: each handle's resources are released exactly once, whichever of handle.close(),
 * closeAll() or the collector comes first, and a release that fails after a collection is reported.
 */
describe('the handle tracker', () => {
  type Log = string[];
  /** A stand-in session: only close() is used by the tracker. */
  const fakeSession = (log: Log, name: string) => ({ close: async () => void log.push(`close ${name}`) }) as unknown as Session;

  it('releaseBoth stops, then releases, once however often it is called', async () => {
    const log: Log = [];
    let finishRelease!: () => void;
    const release = releaseBoth(
      () => log.push('stop'),
      () => {
        log.push('release');
        return new Promise<void>((resolve) => (finishRelease = resolve));
      },
    );
    const first = release();
    const second = release();
    expect(second).toBe(first);
    expect(log).toEqual(['stop', 'release']);
    finishRelease();
    await first;
    await release();
    expect(log).toEqual(['stop', 'release']);
  });

  it('handle.close() closes the session, then releases; again, it releases nothing more; closeAll() skips it', async () => {
    const log: Log = [];
    const tracker = createHandleTracker(() => undefined);
    const a = tracker.track(fakeSession(log, 'a'), async () => void log.push('release a'));
    tracker.track(fakeSession(log, 'b'), async () => void log.push('release b'));
    await a.close();
    expect(log).toEqual(['close a', 'release a']);
    await a.close();
    expect(log).toEqual(['close a', 'release a', 'close a']);
    await tracker.closeAll();
    expect(log).toEqual(['close a', 'release a', 'close a', 'close b', 'release b']);
    await tracker.closeAll();
    expect(log).toHaveLength(5);
  });

  it.skipIf(!isNode)('a collected handle is released once; a failed release is reported as a TabulaError', { timeout: 60_000 }, async () => {
    const gc = await collector();
    const log: Log = [];
    const reported: TabulaError[] = [];
    const tracker = createHandleTracker((error) => reported.push(error));
    const kept = tracker.track(fakeSession(log, 'kept'), async () => void log.push('release kept'));
    const board = {};
    (() => {
      tracker.track(fakeSession(log, 'dropped'), async () => {
        log.push('release dropped');
        throw new Error('disk on fire');
      });
      // Held through its board: not collected while the board is.
      const held = tracker.track(fakeSession(log, 'held'), async () => void log.push('release held'));
      tracker.keepAliveWith(board, held);
    })();
    expect(await collectUntil(gc, () => reported.length > 0)).toBe(true);
    expect(log).toEqual(['release dropped']);
    expect(reported.map((error) => [error.code, error.message])).toEqual([['storage/failed', 'Could not release a collected session handle: disk on fire']]);
    // The rest are closed and released by closeAll(), the collected one not again.
    await tracker.closeAll();
    expect(log.slice(1).sort()).toEqual(['close held', 'close kept', 'release held', 'release kept']);
    // Closing a handle closeAll() released releases nothing more (and keeps `kept` reachable until here).
    await kept.close();
    expect(log.filter((entry) => entry === 'release kept')).toHaveLength(1);
  });

  it.skipIf(!isNode)('closeAll() right after a handle was collected, before its finalizer ran: releases it once, closes only the live ones', { timeout: 60_000 }, async () => {
    const gc = await collector();
    const log: Log = [];
    const tracker = createHandleTracker(() => undefined);
    const kept = tracker.track(fakeSession(log, 'kept'), async () => void log.push('release kept'));
    (() => {
      tracker.track(fakeSession(log, 'dropped'), async () => void log.push('release dropped'));
    })();
    // A new job: the dropped handle's WeakRef is no longer held for the job that made it.
    await new Promise((resolve) => setTimeout(resolve, 0));
    // Collected now; its finalizer can run only after this synchronous stretch, so closeAll() sees it gone first.
    gc();
    await tracker.closeAll();
    expect(log.filter((entry) => entry === 'release dropped')).toHaveLength(1);
    expect(log).not.toContain('close dropped');
    expect(log.filter((entry) => entry.endsWith('kept'))).toEqual(['close kept', 'release kept']);
    await kept.close();
  });
});
