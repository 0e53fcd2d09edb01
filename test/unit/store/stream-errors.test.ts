/**
 * What session.stream() (src/store/stream.ts) refuses and how its failures say so: wrong arguments
 * named, a done(final) that is not message fields refused with the stream left open, a stream whose
 * message a restore replaced, a flush that fails reported once, and a full disk named by the step
 * that met it (starting, flushing, completing, interrupting).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freshTabula, nextChange, waitFor } from './helpers.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('session.stream() refuses bad arguments by name', () => {
  it('a missing or other role, an empty or non-string name, a flushIntervalMs that is no number of ms ≥ 0', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await expect(session.stream({ role: 'user' } as never)).rejects.toMatchObject({ code: 'argument/invalid', message: expect.stringMatching(/stream\(\) writes assistant messages/) as string });
    await expect(session.stream({ role: 'assistant', name: '' })).rejects.toMatchObject({ code: 'argument/invalid', message: expect.stringMatching(/stream\(\{ name \}\) must be a non-empty string/) as string });
    await expect(session.stream({ role: 'assistant', name: 42 } as never)).rejects.toMatchObject({ code: 'argument/invalid', message: expect.stringMatching(/name/) as string });
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, -1, '10']) {
      await expect(session.stream({ role: 'assistant', flushIntervalMs: bad } as never)).rejects.toMatchObject({
        code: 'argument/invalid',
        message: expect.stringMatching(/stream\(\{ flushIntervalMs \}\) must be a number of ms ≥ 0, got /) as string,
      });
    }
    // Nothing was started by a refused call.
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });

  it('done(final) that is not an object of message fields is refused and the stream stays open', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    stream.write('answer');
    for (const bad of [null, [], 'text', 7]) {
      await expect(stream.done(bad as never)).rejects.toMatchObject({ code: 'argument/invalid', message: 'done(final) takes an object of message fields.' });
    }
    await expect(stream.done({ role: 'user' } as never)).rejects.toMatchObject({
      message: `done(final) of stream ${stream.id}: a stream writes an assistant message; final.role "user" is refused.`,
    });
    expect(() => stream.write(7 as never)).toThrow(expect.objectContaining({ code: 'argument/invalid', message: 'stream.write() takes a string chunk, got number.' }) as Error);
    await expect(stream.done({ content: 7 } as never)).rejects.toMatchObject({
      code: 'schema/invalid',
      message: expect.stringContaining(`the final message of stream ${stream.id}`) as string,
    });
    expect(await stream.done({ name: 'bot' })).toMatchObject({ status: 'complete', content: 'answer', name: 'bot' });
    expect(() => stream.write('late')).toThrow(`Stream ${stream.id} is finished; write() after done() or abort() is refused.`);
    await expect(stream.abort()).rejects.toMatchObject({ code: 'stream/closed', message: `Stream ${stream.id} is already finished.` });
    await tabula.close();
  });
});

describe('a stream whose message was replaced', () => {
  it('by restore() to a checkpoint taken mid-stream (which holds it interrupted): done() is refused and the checkpoint’s copy stays', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
    const flushed = nextChange(session, 'message.update');
    stream.write('half');
    await flushed;
    const checkpoint = await session.checkpoint();
    stream.write(' and more');
    await session.restore(checkpoint.id);
    await expect(stream.done()).rejects.toMatchObject({
      code: 'stream/dropped',
      message: expect.stringContaining(`Streamed message ${stream.id} of session "s" of user "anonymous" is no longer stored as streaming`) as string,
    });
    expect((await session.messages()).map((m) => [m.id, m.status, m.content])).toEqual([[stream.id, 'interrupted', 'half']]);
    await tabula.close();
  });

  it('a flush that fails is reported once, and the stream refuses further writes with that error', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
    await session.clearContext();
    stream.write('into the void');
    await waitFor(() => tabula.reported.length > 0);
    expect(tabula.reported).toHaveLength(1);
    const [failure] = tabula.reported;
    expect(failure).toMatchObject({ code: 'stream/dropped', message: expect.stringContaining('Its text was not saved; append it again if it is still wanted.') as string });
    expect(() => stream.write('more')).toThrow(failure);
    await expect(stream.done()).rejects.toMatchObject({ code: 'stream/dropped' });
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });
});

describe('a stream that hits the storage quota', () => {
  /** Makes IndexedDB refuse every write with QuotaExceededError, as a full origin does, until restored. */
  const fillQuota = () => {
    const full = () => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    };
    return [vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(full), vi.spyOn(IDBObjectStore.prototype, 'add').mockImplementation(full)];
  };

  it('says which step failed: starting, flushing, completing or interrupting the streamed message of which session', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const label = '(session "s" of user "anonymous")';
    let spies = fillQuota();
    await expect(session.stream({ role: 'assistant' })).rejects.toMatchObject({
      code: 'storage/quota-exceeded',
      message: expect.stringContaining(`Could not start a streamed message ${label}:`) as string,
    });
    spies.forEach((spy) => spy.mockRestore());

    const completing = await session.stream({ role: 'assistant' });
    const interrupting = await session.stream({ role: 'assistant' });
    completing.write('a');
    interrupting.write('b');
    spies = fillQuota();
    await expect(completing.done()).rejects.toMatchObject({ message: expect.stringContaining(`Could not complete a streamed message ${label}:`) as string });
    await expect(interrupting.abort()).rejects.toMatchObject({ message: expect.stringContaining(`Could not interrupt a streamed message ${label}:`) as string });

    const flushing = await (async () => {
      spies.forEach((spy) => spy.mockRestore());
      const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
      spies = fillQuota();
      return stream;
    })();
    flushing.write('c');
    await waitFor(() => tabula.reported.length > 0);
    expect(tabula.reported[0]).toMatchObject({ code: 'storage/quota-exceeded', message: expect.stringContaining(`Could not flush a streamed message ${label}:`) as string });
    spies.forEach((spy) => spy.mockRestore());
    await tabula.close();
  });
});
