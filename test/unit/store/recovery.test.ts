/**
 * Crash recovery across tabs (recovery.ts), with a tab that can crash: tab A
 * opens on a lock manager whose locks the test can drop all at once, as the
 * browser drops a crashed tab's Web Locks, while A itself never learns of it.
 * The other tab, B, must leave A's live runs and streams alone, notice the
 * moment A's stream lock goes (whether B opened the session before or after
 * the stream started), mark the stream interrupted with its flushed text, and
 * touch nothing a finished stream, a clear or a delete left behind. These
 * tests need the in-process lock manager to fake the crash, so they run in
 * Node only; in Chromium, test/e2e/runs-multitab.spec.ts crashes a real tab mid-stream.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Session, SessionChange } from '../../../src/index.js';
import { localLocks } from '../../../src/store/locks.js';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, uniqueName, waitFor } from './helpers.js';

const hasWebLocks = typeof navigator === 'object' && 'locks' in navigator;

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

/**
 * Opens a Tabula whose locks (Web Locks to it: navigator.locks is stubbed while it opens) live in the
 * in-process manager every other instance uses, and are all released by crash() without the instance
 * hearing of it.
 */
async function crashableTab(name: string) {
  const local = localLocks();
  let crash: () => void = () => undefined;
  const crashed = new Promise<null>((resolve) => (crash = () => resolve(null)));
  /** While set, the next query of the held locks (recovery's) waits for it; `queries` counts them. */
  let gate: Promise<void> | null = null;
  let queries = 0;
  const manager = {
    request(lockName: string, options: LockOptions, callback: (lock: { name: string } | null) => Promise<unknown>) {
      const forwarded = { ...(options.ifAvailable ? { ifAvailable: true } : {}), ...(options.signal ? { signal: options.signal } : {}) };
      return local.request(lockName, forwarded, (lock) => Promise.race([callback(lock), crashed]));
    },
    async query() {
      queries += 1;
      if (gate) {
        const waiting = gate;
        gate = null;
        await waiting;
      }
      return { held: (await local.held()).map((held) => ({ name: held })) };
    },
  };
  /** Holds the next query of the held locks until release(), or fails it with fail(error). */
  const holdQuery = () => {
    let release: () => void = () => undefined;
    let fail: (error: Error) => void = () => undefined;
    gate = new Promise<void>((resolve, reject) => {
      release = resolve;
      fail = reject;
    });
    return { release, fail };
  };
  vi.stubGlobal('navigator', { locks: manager });
  try {
    const tabula = await freshTabula({ name });
    return Object.assign(tabula, { crash, holdQuery, queries: () => queries });
  } finally {
    vi.unstubAllGlobals();
  }
}

/**
 * Resolves once every watcher queued on the lock of stream `id` has run: it queues for the lock itself
 * (locks are granted in the order asked). The name is the one coordinator.ts gives a stream's lock.
 */
const afterWatchers = (name: string, sessionId: string, id: string) =>
  localLocks().request(`tabula:${name}:stream:${JSON.stringify(['anonymous', sessionId])}:${id}`, {}, async () => undefined);

/** Resolves with the next change of `session` that `match` accepts. */
function nextChange(session: Session, match: (change: SessionChange) => boolean): Promise<SessionChange> {
  return new Promise((resolve) => {
    const stop = session.subscribe((change) => {
      if (!match(change)) return;
      stop();
      resolve(change);
    });
  });
}

const isUpdate = (change: SessionChange) => change.kinds.includes('message.update');
const statusOf = async (session: Session, id: string) => {
  const found = (await session.messages()).find((m) => m.id === id);
  return found && [found.status, found.content];
};

describe.skipIf(hasWebLocks)('crash recovery across tabs', () => {
  it('opening a session leaves another tab’s live run running and its live stream streaming', async () => {
    const name = uniqueName();
    const tabA = await crashableTab(name);
    const a = await tabA.session('s');
    let startedRun: () => void = () => undefined;
    const runStarted = new Promise<void>((resolve) => (startedRun = resolve));
    let endRun: () => void = () => undefined;
    const running = a.run(async () => {
      startedRun();
      await new Promise<void>((resolve) => (endRun = resolve));
    });
    await runStarted;
    const stream = await a.stream({ role: 'assistant', flushIntervalMs: 0 });
    const flushed = nextChange(a, isUpdate);
    stream.write('live');
    await flushed;

    const tabB = await freshTabula({ name });
    const b = await tabB.session('s');
    expect((await b.runs()).map((run) => run.status)).toEqual(['running']);
    expect(await statusOf(b, stream.id)).toEqual(['streaming', 'live']);
    endRun();
    await running;
    expect(await stream.done()).toMatchObject({ status: 'complete', content: 'live' });
    // B watched the stream since it opened the session; its watcher, woken by the end, changes nothing.
    await afterWatchers(name, 's', stream.id);
    expect((await b.runs()).map((run) => run.status)).toEqual(['succeeded']);
    expect(await statusOf(b, stream.id)).toEqual(['complete', 'live']);
    expect([...tabA.reported, ...tabB.reported]).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('a tab that opened the session while another streamed marks the stream interrupted, text kept, the moment that tab crashes', async () => {
    const name = uniqueName();
    const tabA = await crashableTab(name);
    const a = await tabA.session('s');
    const stream = await a.stream({ role: 'assistant', flushIntervalMs: 0 });
    const flushed = nextChange(a, isUpdate);
    stream.write('half an ans');
    await flushed;

    const tabB = await freshTabula({ name });
    const b = await tabB.session('s');
    // A second handle to the session in B watches the same stream; the stream is still interrupted once.
    const again = await tabB.session('s');
    const interrupted = nextChange(b, isUpdate);
    tabA.crash();
    await interrupted;
    expect(await statusOf(b, stream.id)).toEqual(['interrupted', 'half an ans']);
    expect(await statusOf(again, stream.id)).toEqual(['interrupted', 'half an ans']);
    // Tab A, had it lived on, could not complete what the others buried.
    await expect(stream.done()).rejects.toMatchObject({ code: 'stream/dropped' });
    expect(tabB.reported).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('a tab that had the session open hears of each stream another tab starts, after a burst of appends too, and interrupts it when that tab crashes', async () => {
    const name = uniqueName();
    const tabB = await freshTabula({ name });
    const b = await tabB.session('s');
    const tabA = await crashableTab(name);
    const a = await tabA.session('s');

    // A stream that ends normally: B's watcher, woken by its end, changes nothing.
    const first = await a.stream({ role: 'assistant' });
    await expect.poll(() => statusOf(b, first.id), { timeout: 20_000 }).toEqual(['streaming', '']);
    first.write('finished');
    await first.done();
    await afterWatchers(name, 's', first.id);

    // Many appends, then a stream, in one burst: B's checks coalesce and still find the stream.
    const appends = Array.from({ length: 5 }, (_, i) => a.append({ role: 'user', content: `burst ${i}` }));
    const second = a.stream({ role: 'assistant', flushIntervalMs: 0 });
    await Promise.all(appends);
    const stream = await second;
    const flushed = nextChange(a, isUpdate);
    stream.write('cut');
    await flushed;
    await expect.poll(() => statusOf(b, stream.id), { timeout: 20_000 }).toEqual(['streaming', 'cut']);

    const interrupted = nextChange(b, isUpdate);
    tabA.crash();
    await interrupted;
    expect(await statusOf(b, stream.id)).toEqual(['interrupted', 'cut']);
    expect(await statusOf(b, first.id)).toEqual(['complete', 'finished']);
    expect(tabB.reported).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('streams in two sessions started at once are both watched', async () => {
    const name = uniqueName();
    const tabB = await freshTabula({ name });
    const inB = [await tabB.session('x'), await tabB.session('y')];
    const tabA = await crashableTab(name);
    const inA = [await tabA.session('x'), await tabA.session('y')];
    const streams = await Promise.all(inA.map((session) => session.stream({ role: 'assistant' })));
    await expect.poll(async () => [await statusOf(inB[0]!, streams[0]!.id), await statusOf(inB[1]!, streams[1]!.id)], { timeout: 20_000 }).toEqual([
      ['streaming', ''],
      ['streaming', ''],
    ]);
    const interrupted = inB.map((session) => nextChange(session, isUpdate));
    tabA.crash();
    await Promise.all(interrupted);
    expect([await statusOf(inB[0]!, streams[0]!.id), await statusOf(inB[1]!, streams[1]!.id)]).toEqual([
      ['interrupted', ''],
      ['interrupted', ''],
    ]);
    await tabA.close();
    await tabB.close();
  });

  it('a watched stream whose message was cleared, or whose session was deleted, leaves nothing behind when its tab crashes', async () => {
    const name = uniqueName();
    const tabA = await crashableTab(name);
    const tabB = await freshTabula({ name });
    const cleared = await (await tabA.session('cleared')).stream({ role: 'assistant' });
    const deleted = await (await tabA.session('deleted')).stream({ role: 'assistant' });
    const b = await tabB.session('cleared');
    await tabB.session('deleted');
    await b.clearContext();
    await tabB.deleteSession('deleted');
    tabA.crash();
    await afterWatchers(name, 'cleared', cleared.id);
    await afterWatchers(name, 'deleted', deleted.id);
    expect(await b.messages()).toEqual([]);
    expect((await tabB.sessions()).map((s) => s.sessionId)).toEqual(['cleared']);
    expect(tabB.reported).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('a tab closed while it watched a stream does nothing and reports nothing when the streaming tab crashes later', async () => {
    const name = uniqueName();
    const tabA = await crashableTab(name);
    const a = await tabA.session('s');
    const stream = await a.stream({ role: 'assistant' });
    const tabB = await freshTabula({ name });
    await tabB.session('s');
    await tabB.close();
    const tabC = await freshTabula({ name });
    const c = await tabC.session('s');
    const interrupted = nextChange(c, isUpdate);
    tabA.crash();
    await interrupted;
    expect(await statusOf(c, stream.id)).toEqual(['interrupted', '']);
    expect(tabB.reported).toEqual([]);
    expect(tabC.reported).toEqual([]);
    await tabA.close();
    await tabC.close();
  });

  it('a watcher that cannot write the interrupt (storage full) reports it, naming the stream', async () => {
    const name = uniqueName();
    const tabA = await crashableTab(name);
    const stream = await (await tabA.session('s')).stream({ role: 'assistant' });
    const tabB = await freshTabula({ name });
    await tabB.session('s');
    const full = () => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    };
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(full);
    tabA.crash();
    await waitFor(() => tabB.reported.length > 0);
    expect(tabB.reported[0]).toMatchObject({ code: 'storage/quota-exceeded', message: expect.stringContaining(`Could not mark stream ${stream.id} interrupted:`) as string });
    vi.restoreAllMocks();
    await tabA.close();
    await tabB.close();
  });
});

describe.skipIf(hasWebLocks)('crash recovery while its own check is under way', () => {
  it('a stream started while a check of the session is under way is found by the check that follows it', async () => {
    const name = uniqueName();
    const tabB = await crashableTab(name);
    const b = await tabB.session('s');
    const tabA = await crashableTab(name);
    const a = await tabA.session('s');
    // B's check for A's first stream stops at its query of the held locks, after reading the rows.
    const held = tabB.holdQuery();
    const first = await a.stream({ role: 'assistant' });
    await waitFor(() => tabB.queries() === 1);
    // A second stream starts meanwhile: B hears of it while its check is still under way.
    const heard = nextChange(b, (change) => change.kinds.includes('message.append'));
    const second = await a.stream({ role: 'assistant' });
    await heard;
    held.release();
    // B checks again after that check and watches the second stream too: both are interrupted when A crashes.
    await waitFor(() => tabB.queries() === 2);
    tabA.crash();
    await afterWatchers(name, 's', first.id);
    await afterWatchers(name, 's', second.id);
    expect(await statusOf(b, first.id)).toEqual(['interrupted', '']);
    expect(await statusOf(b, second.id)).toEqual(['interrupted', '']);
    expect(tabB.reported).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('a check that fails is reported, naming the session; one that fails after close() is not', async () => {
    const name = uniqueName();
    const tabB = await crashableTab(name);
    const b = await tabB.session('s');
    const tabA = await crashableTab(name);
    const a = await tabA.session('s');
    let held = tabB.holdQuery();
    await a.stream({ role: 'assistant' });
    await waitFor(() => tabB.queries() === 1);
    held.fail(new Error('the lock manager failed'));
    await waitFor(() => tabB.reported.length > 0);
    expect(tabB.reported).toEqual([expect.objectContaining({ code: 'storage/failed', message: 'Could not recover session "s": the lock manager failed' })]);

    held = tabB.holdQuery();
    await a.stream({ role: 'assistant' });
    await waitFor(() => tabB.queries() === 2);
    await tabB.close();
    held.fail(new Error('too late to matter'));
    // The failed check's handlers are promise callbacks: all of them have run before the next task.
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(tabB.reported).toHaveLength(1);
    await expect(b.messages()).rejects.toMatchObject({ code: 'storage/closed' });
    await tabA.close();
  });

  it('a run left running, whose session another tab deletes while the check that found it is under way: the open still succeeds and writes nothing', async () => {
    const name = uniqueName();
    const setup = await freshTabula({ name });
    await setup.session('s');
    const raw = createDb(name);
    await raw.runs.put({ runId: 'orphan', userId: 'anonymous', sessionId: 's', scope: 'default', visit: 1, attempt: 1, status: 'running', startedAt: 1, endedAt: null });
    raw.close();
    const tabB = await crashableTab(name);
    const held = tabB.holdQuery();
    const opening = tabB.session('s');
    await waitFor(() => tabB.queries() === 1);
    await setup.deleteSession('s');
    held.release();
    const session = await opening;
    await expect(session.runs()).resolves.toEqual([]);
    const check = createDb(name);
    expect(await check.runs.toArray()).toEqual([]);
    check.close();
    expect(tabB.reported).toEqual([]);
    await setup.close();
    await tabB.close();
  });
});

describe('crash recovery on open', () => {
  it('a stream left by a tab that is gone, found when storage is full: session() fails naming the stream it could not mark', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    await tabula.session('s');
    const raw = createDb(name);
    await raw.messages.put({
      id: 'dangling',
      userId: 'anonymous',
      sessionId: 's',
      order: '000000000000001.000000.gone',
      createdAt: 1,
      status: 'streaming',
      message: { role: 'assistant', content: 'half' },
      streaming: 1,
    });
    raw.close();
    const spy = vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(() => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    });
    await expect(tabula.session('s')).rejects.toMatchObject({ code: 'storage/quota-exceeded', message: expect.stringContaining('Could not mark stream dangling interrupted:') as string });
    spy.mockRestore();
    expect(await statusOf(await tabula.session('s'), 'dangling')).toEqual(['interrupted', 'half']);
    await tabula.close();
  });
});
