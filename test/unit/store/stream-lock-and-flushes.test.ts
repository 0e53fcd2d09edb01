/**
 * session.stream()'s lock and flushes (src/store/stream.ts): the stream's lock is held while it streams
 * and released however it ends (other tabs read a held lock as "still streaming"); a write that adds
 * no text flushes nothing; the flush schedule, checked on a fake clock rather than timed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { platformLocks } from '../../../src/store/locks.js';
import { freshTabula, uniqueName } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** The held locks that name the stream `id` (its lock is named for its message). */
const locksOf = async (id: string) => (await platformLocks().held()).filter((name) => name.endsWith(`:${id}`));

/** Waits until the stream's lock is released (released once the stream ended, not before its promise settles). */
const released = (id: string) => expect.poll(() => locksOf(id), { timeout: 20_000 }).toEqual([]);

describe('the stream lock', () => {
  it('is held while the stream is open and released when it completes or is aborted', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const completed = await session.stream({ role: 'assistant' });
    const aborted = await session.stream({ role: 'assistant' });
    expect(await locksOf(completed.id)).toHaveLength(1);
    expect(await locksOf(aborted.id)).toHaveLength(1);
    completed.write('done');
    await completed.done();
    await released(completed.id);
    expect(await locksOf(aborted.id)).toHaveLength(1);
    await aborted.abort();
    await released(aborted.id);
    await tabula.close();
  });

  it('is released when done() fails too, and when the stream could not start', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const session = await tabA.session('s');
    const stream = await session.stream({ role: 'assistant' });
    await tabB.deleteSession('s');
    await expect(stream.done()).rejects.toMatchObject({ code: 'session/not-found' });
    await released(stream.id);
    // The handle outlived its session: the start fails and leaves no lock behind.
    const before = await platformLocks().held();
    await expect(session.stream({ role: 'assistant' })).rejects.toMatchObject({ code: 'session/not-found' });
    await expect.poll(async () => (await platformLocks().held()).filter((lock) => !before.includes(lock) && lock.includes(`tabula:${name}:stream:`)), { timeout: 20_000 }).toEqual([]);
    await tabA.close();
    await tabB.close();
  });
});
describe('writes that add no text', () => {
  it('an empty chunk flushes nothing: the only update is the final one', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
    let updates = 0;
    session.subscribe((change) => {
      if (change.kinds.includes('message.update')) updates += 1;
    });
    stream.write('');
    // The flush timer (0 ms) was set before this one: it has fired when this one fires.
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(await stream.done()).toMatchObject({ status: 'complete', content: '' });
    // Change events of this tab are delivered when the write commits, before it resolves.
    expect(updates).toBe(1);
    await tabula.close();
  });
});
describe('the flush schedule, on fake timers', () => {
  it('one timer for any number of chunks, the next flush a full interval after the last, no timer left once done', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 60_000 });
    let updates = 0;
    let onUpdate = () => undefined as void;
    session.subscribe((change) => {
      if (!change.kinds.includes('message.update')) return;
      updates += 1;
      onUpdate();
    });
    const nextUpdate = () => new Promise<void>((resolve) => (onUpdate = resolve));
    // Only the stream's timers are faked: IndexedDB (fake-indexeddb's setImmediate, or the browser's) runs on.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    stream.write('one ');
    stream.write('two ');
    // The first flush is due at once (none came before), and two chunks set one timer.
    expect(vi.getTimerCount()).toBe(1);
    let flushed = nextUpdate();
    vi.advanceTimersByTime(0);
    await flushed;
    expect((await session.messages())[0]?.content).toBe('one two ');

    stream.write('three');
    expect(vi.getTimerCount()).toBe(1);
    // Half an interval after the last flush (give or take the real milliseconds this test took): still waiting.
    vi.advanceTimersByTime(30_000);
    expect(vi.getTimerCount()).toBe(1);
    flushed = nextUpdate();
    vi.advanceTimersByTime(30_000);
    expect(vi.getTimerCount()).toBe(0);
    await flushed;
    expect(updates).toBe(2);

    stream.write(' four');
    expect(vi.getTimerCount()).toBe(1);
    const final = stream.done();
    // done() writes the text itself and drops the pending flush.
    expect(vi.getTimerCount()).toBe(0);
    expect(await final).toMatchObject({ status: 'complete', content: 'one two three four' });
    expect(updates).toBe(3);
    vi.useRealTimers();
    await tabula.close();
  });
});
