/**
 * The lock managers of locks.ts. The in-process one (Node, old browsers)
 * must keep the Web Locks contract Tabula relies on: one holder per name, the
 * waiters granted in the order they asked, `ifAvailable` answering null at
 * once, an aborted wait leaving the queue as it was, and one manager shared
 * by every instance in the process. The same contract tests run against
 * platformLocks(): in Node that is the in-process manager again, in the
 * browser project (which runs this file in Chromium) the real Web Locks, so
 * the two are held to one contract. The Web Locks adapter's own calls are
 * checked in Node against a fake LockManager standing in for navigator.locks.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { localLocks, platformLocks, type Locks } from '../../../src/store/locks.js';
import { freshTabula, uniqueName } from './helpers.js';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((settle) => (resolve = settle));
  return { promise, resolve };
}

/** Takes `name` and keeps it until release() is called; `taken` resolves once the callback runs. */
function hold(locks: Locks, name: string, options: { signal?: AbortSignal } = {}) {
  const release = deferred();
  const taken = deferred();
  const done = locks.request(name, options, async (lock) => {
    taken.resolve();
    await release.promise;
    return lock;
  });
  return { taken: taken.promise, release: release.resolve, done };
}

afterEach(() => {
  vi.unstubAllGlobals();
});

const hasWebLocks = typeof navigator === 'object' && 'locks' in navigator;

describe.each([
  ['localLocks', localLocks],
  ['platformLocks', platformLocks],
])('%s', (_, makeLocks) => {
  it('lets one holder at a time have a name, grants waiters in the order they asked, and lists the held names', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const other = uniqueName('lock');
    const order: string[] = [];
    const first = hold(locks, name);
    await first.taken;
    // Another name is free meanwhile.
    expect(await locks.request(other, {}, async (lock) => lock)).toEqual({ name: other });
    expect(await locks.held()).toContain(name);
    expect(await locks.held()).not.toContain(other);

    const waiters = ['second', 'third', 'fourth'].map((label) =>
      locks.request(name, {}, async (lock) => {
        order.push(label);
        return lock;
      }),
    );
    // Queued: none runs while the first holds the name.
    await Promise.resolve();
    expect(order).toEqual([]);
    first.release();
    expect(await first.done).toEqual({ name });
    expect(await Promise.all(waiters)).toEqual([{ name }, { name }, { name }]);
    expect(order).toEqual(['second', 'third', 'fourth']);
    expect(await locks.held()).not.toContain(name);
  });

  it('passes the name straight to the next waiter: it stays held between the two holders', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const first = hold(locks, name);
    await first.taken;
    const second = hold(locks, name);
    first.release();
    await first.done;
    // The second holder has it now; nobody else can slip in with ifAvailable.
    expect(await locks.held()).toContain(name);
    expect(await locks.request(name, { ifAvailable: true }, async (lock) => lock)).toBeNull();
    await second.taken;
    second.release();
    await second.done;
    expect(await locks.held()).not.toContain(name);
  });

  it('with ifAvailable answers null at once while the name is held, without taking or queueing it, and grants it when free', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    expect(await locks.request(name, { ifAvailable: true }, async (lock) => lock)).toEqual({ name });
    const first = hold(locks, name);
    await first.taken;
    expect(await locks.request(name, { ifAvailable: true }, async (lock) => lock)).toBeNull();
    first.release();
    await first.done;
    // The null answer queued nothing: the name is free again.
    expect(await locks.held()).not.toContain(name);
  });

  it('returns what the callback returns, and releases the name when the callback throws', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    expect(await locks.request(name, {}, async () => 42)).toBe(42);
    const failure = new Error('callback failed');
    const first = hold(locks, name);
    await first.taken;
    const failing = locks.request(name, {}, async () => {
      throw failure;
    });
    const after = locks.request(name, {}, async (lock) => lock);
    first.release();
    await expect(failing).rejects.toBe(failure);
    expect(await after).toEqual({ name });
    expect(await locks.held()).not.toContain(name);
  });

  it('refuses a request whose signal is already aborted, without running the callback or taking the name', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const reason = new Error('gave up');
    const callback = vi.fn(async () => 'ran');
    await expect(locks.request(name, { signal: AbortSignal.abort(reason) }, callback)).rejects.toBe(reason);
    await expect(locks.request(name, { ifAvailable: true, signal: AbortSignal.abort(reason) }, callback)).rejects.toBe(reason);
    expect(callback).not.toHaveBeenCalled();
    expect(await locks.held()).not.toContain(name);
    expect(await locks.request(name, { ifAvailable: true }, async (lock) => lock)).toEqual({ name });
  });

  it('refuses a request whose signal is already aborted while the name is held, rather than queueing it (it would never hear the abort)', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const reason = new Error('gave up');
    const first = hold(locks, name);
    await first.taken;
    const callback = vi.fn(async () => 'ran');
    const refused = locks.request(name, { signal: AbortSignal.abort(reason) }, callback).then(() => 'granted', (error: unknown) => error);
    const refusedAtOnce = locks.request(name, { ifAvailable: true, signal: AbortSignal.abort(reason) }, callback).then(() => 'answered', (error: unknown) => error);
    first.release();
    await first.done;
    expect(await refused).toBe(reason);
    expect(await refusedAtOnce).toBe(reason);
    expect(callback).not.toHaveBeenCalled();
    expect(await locks.held()).not.toContain(name);
  });

  it('takes ifAvailable together with a signal that is not aborted: the name when free, null when held', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const { signal } = new AbortController();
    expect(await locks.request(name, { ifAvailable: true, signal }, async (lock) => lock)).toEqual({ name });
    const first = hold(locks, name);
    await first.taken;
    expect(await locks.request(name, { ifAvailable: true, signal }, async (lock) => lock)).toBeNull();
    first.release();
    await first.done;
  });

  it('an aborted wait rejects with the abort reason and leaves the other waiters in order', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const order: string[] = [];
    const first = hold(locks, name);
    await first.taken;
    const withError = new AbortController();
    const withOther = new AbortController();
    const queued = (label: string, signal?: AbortSignal) =>
      locks.request(name, signal ? { signal } : {}, async () => {
        order.push(label);
      });
    const a = queued('a');
    const b = queued('b', withError.signal);
    const c = queued('c');
    const d = queued('d', withOther.signal);
    const e = queued('e');
    const reason = new Error('no longer wanted');
    const otherReason = new Error('nor this one');
    withError.abort(reason);
    withOther.abort(otherReason);
    await expect(b).rejects.toBe(reason);
    await expect(d).rejects.toBe(otherReason);
    // The holder is not disturbed by aborts in the queue.
    expect(await locks.held()).toContain(name);
    expect(order).toEqual([]);
    first.release();
    await Promise.all([first.done, a, c, e]);
    expect(order).toEqual(['a', 'c', 'e']);
    expect(await locks.held()).not.toContain(name);
  });

  it('an abort after the wait was granted changes nothing: the holder keeps the name and the next waiter still gets it', async () => {
    const locks = makeLocks();
    const name = uniqueName('lock');
    const first = hold(locks, name);
    await first.taken;
    const late = new AbortController();
    const second = hold(locks, name, { signal: late.signal });
    const third = hold(locks, name);
    first.release();
    await second.taken;
    // Granted already: aborting its signal now must not drop anyone from the queue.
    late.abort(new Error('too late'));
    second.release();
    expect(await second.done).toEqual({ name });
    expect(await locks.held()).toContain(name);
    await third.taken;
    third.release();
    expect(await third.done).toEqual({ name });
    expect(await locks.held()).not.toContain(name);
  });

  it('is one manager for the whole process: a name held through one instance is held for every other', async () => {
    const one = makeLocks();
    const two = makeLocks();
    const name = uniqueName('lock');
    const first = hold(one, name);
    await first.taken;
    expect(await two.held()).toContain(name);
    expect(await two.request(name, { ifAvailable: true }, async (lock) => lock)).toBeNull();
    const waiting = two.request(name, {}, async (lock) => lock);
    first.release();
    expect(await waiting).toEqual({ name });
  });
});

describe('localLocks, where Web Locks would differ', () => {
  it('rejects an aborted wait with an AbortError when the abort reason is no Error', async () => {
    const locks = localLocks();
    const name = uniqueName('lock');
    const first = hold(locks, name);
    await first.taken;
    const controller = new AbortController();
    const waiting = locks.request(name, { signal: controller.signal }, async () => 'ran');
    controller.abort('not an Error');
    const refused = await waiting.then(() => null, (error: unknown) => error);
    expect(refused).toBeInstanceOf(DOMException);
    expect(refused).toMatchObject({ name: 'AbortError', message: 'The lock request was aborted.' });
    const abortedBefore = locks.request(name, { signal: AbortSignal.abort('neither') }, async () => 'ran');
    first.release();
    await first.done;
    await expect(abortedBefore).rejects.toMatchObject({ name: 'AbortError' });
    expect(await locks.held()).not.toContain(name);
  });
});

/** A stand-in for navigator.locks recording what the adapter asks of it. */
function fakeLockManager(snapshot: { held?: { name?: string }[] }) {
  const requests: { name: string; options: LockOptions }[] = [];
  let available = true;
  const manager = {
    requests,
    setAvailable(value: boolean) {
      available = value;
    },
    request(name: string, options: LockOptions, callback: (lock: { name: string; mode: string } | null) => unknown) {
      requests.push({ name, options });
      // As the Web Locks spec and Chromium do.
      if (options.signal && options.ifAvailable) {
        return Promise.reject(new DOMException("The 'signal' and 'ifAvailable' options cannot be used together.", 'NotSupportedError'));
      }
      if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
        return Promise.reject(new TypeError("Failed to read the 'signal' property from 'LockOptions': Failed to convert value to 'AbortSignal'."));
      }
      if (options.signal?.aborted) return Promise.reject(options.signal.reason as Error);
      return Promise.resolve(callback(available ? { name, mode: 'exclusive' } : null));
    },
    query() {
      return Promise.resolve(snapshot);
    },
  };
  return manager;
}

// In Chromium (the browser project) the contract tests above run platformLocks() on the real Web Locks.
describe.skipIf(hasWebLocks)('platformLocks in Node', () => {
  it('is the in-process manager where the platform has no Web Locks (Node)', async () => {
    const name = uniqueName('lock');
    const first = hold(platformLocks(), name);
    await first.taken;
    expect(await localLocks().held()).toContain(name);
    first.release();
    await first.done;
  });

  it('passes Web Locks a signal of this realm that follows a foreign one (another realm’s, a library’s)', async () => {
    const manager = fakeLockManager({});
    vi.stubGlobal('navigator', { locks: manager });
    const locks = platformLocks();
    const foreign = (aborted: boolean) => {
      const target = new EventTarget();
      return Object.assign(target, { aborted, reason: aborted ? new Error('before') : undefined }) as unknown as AbortSignal & { reason: unknown };
    };
    const live = foreign(false);
    expect(await locks.request('foreign', { signal: live }, async (lock) => lock)).toEqual({ name: 'foreign' });
    const passed = manager.requests.at(-1)?.options.signal;
    expect(passed).toBeInstanceOf(AbortSignal);
    expect(passed?.aborted).toBe(false);
    Object.assign(live, { aborted: true, reason: new Error('stop') });
    live.dispatchEvent(new Event('abort'));
    expect(passed?.aborted).toBe(true);
    expect(passed?.reason).toEqual(new Error('stop'));
    const early = foreign(true);
    await expect(locks.request('foreign', { signal: early }, async (lock) => lock)).rejects.toBe(early.reason);
    vi.unstubAllGlobals();
  });

  it('uses navigator.locks where it exists: exclusive mode, ifAvailable and signal only when asked, the callback’s value', async () => {
    const manager = fakeLockManager({});
    vi.stubGlobal('navigator', { locks: manager });
    const locks = platformLocks();
    const signal = new AbortController().signal;

    expect(await locks.request('plain', {}, async (lock) => ({ got: lock }))).toEqual({ got: { name: 'plain' } });
    expect(await locks.request('waits', { ifAvailable: false, signal }, async (lock) => lock)).toEqual({ name: 'waits' });
    manager.setAvailable(false);
    expect(await locks.request('busy', { ifAvailable: true }, async (lock) => lock)).toBeNull();
    // The signal of a request that never waits is not passed on: Web Locks refuses the pair.
    expect(await locks.request('busy', { ifAvailable: true, signal }, async (lock) => lock)).toBeNull();
    const reason = new Error('aborted before');
    await expect(locks.request('late', { ifAvailable: true, signal: AbortSignal.abort(reason) }, async (lock) => lock)).rejects.toBe(reason);
    expect(manager.requests).toEqual([
      { name: 'plain', options: { mode: 'exclusive' } },
      { name: 'waits', options: { mode: 'exclusive', signal } },
      { name: 'busy', options: { mode: 'exclusive', ifAvailable: true } },
      { name: 'busy', options: { mode: 'exclusive', ifAvailable: true } },
    ]);
    // Nothing went to the in-process manager.
    expect(await localLocks().held()).not.toContain('plain');
  });

  it('lists the held names navigator.locks reports, skipping locks without a name, and none when it reports none', async () => {
    vi.stubGlobal('navigator', { locks: fakeLockManager({ held: [{ name: 'a' }, {}, { name: '' }, { name: 'b' }] }) });
    expect(await platformLocks().held()).toEqual(['a', 'b']);
    vi.stubGlobal('navigator', { locks: fakeLockManager({}) });
    expect(await platformLocks().held()).toEqual([]);
  });
});

describe('a run that does not wait, with a signal (through the public API)', () => {
  it('runs when the session is free and is refused with run/busy when another run holds it, in Node and on Web Locks alike', async () => {
    const tabula = await freshTabula();
    try {
      const session = await tabula.session('s');
      const { signal } = new AbortController();
      expect(await session.run(async () => 'ran', { wait: false, signal })).toBe('ran');
      const started = deferred();
      const finish = deferred();
      const holding = session.run(async () => {
        started.resolve();
        await finish.promise;
      });
      await started.promise;
      await expect(session.run(async () => 'ran', { wait: false, signal })).rejects.toMatchObject({ code: 'run/busy' });
      finish.resolve();
      await holding;
      expect((await session.runs()).map((run) => run.status)).toEqual(['succeeded', 'succeeded']);
      expect(tabula.reported).toEqual([]);
    } finally {
      await tabula.close();
    }
  });
});
