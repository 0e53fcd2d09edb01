import { describe, expect, it, vi } from 'vitest';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { createTokenCounter, messageTokenText, type Message } from '../../../src/index.js';
import { MESSAGE_OVERHEAD_TOKENS } from '../../../src/core/tokens.js';
import { IN_THREAD_ENCODINGS } from '../../../src/tokens/in-thread-encodings.js';
import { freshTabula, uniqueName } from '../store/helpers.js';
import { SAMPLES } from './samples.js';

const plain = { disallowedSpecial: new Set<string>() };

describe('createTokenCounter (Node: no Worker, so in-thread)', () => {
  it('falls back to the calling thread when no worker exists, and says why', async () => {
    const counter = createTokenCounter({ worker: 'shared' });
    expect(await counter.ready).toBe('in-thread');
    expect(counter.mode).toBe('in-thread');
    expect(counter.fallbackReason).toMatch(/SharedWorker is not available; Worker is not available/);
    expect(counter.name).toBe('o200k_base');
    counter.close();
  });

  it("counts a message as its token text plus the fixed overhead, the same pieces the estimate measures", async () => {
    const counter = createTokenCounter({ worker: 'none' });
    const messages: Message[] = [
      { role: 'user', content: SAMPLES.english!, name: 'ann' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search', arguments: '{"q":"weather"}' } }] },
      { role: 'tool', content: '18°C', tool_call_id: 'c1' },
    ];
    const each = await counter.countEach(messages);
    expect(each).toEqual(messages.map((m) => o200k.countTokens(messageTokenText(m), plain) + MESSAGE_OVERHEAD_TOKENS));
    expect(await counter.count(messages)).toBe(each.reduce((a, b) => a + b, 0));
    counter.close();
  });

  it('countText with progress and an AbortSignal', async () => {
    const counter = createTokenCounter({ worker: 'none', encoding: 'cl100k_base' });
    const text = `${SAMPLES.code}\n`.repeat(10_000);
    const seen: number[] = [];
    expect(await counter.countText(text, { onProgress: (done) => seen.push(done) })).toBeGreaterThan(100_000);
    expect(seen.at(-1)).toBe(text.length);
    const controller = new AbortController();
    const other = `${SAMPLES.english}\n`.repeat(12_000);
    const aborted = counter.countText(other, { signal: controller.signal, onProgress: () => controller.abort('stop') });
    await expect(aborted).rejects.toMatchObject({ code: 'tokens/aborted' });
    counter.close();
  });

  it('refuses a bad encoding or worker option', () => {
    expect(() => createTokenCounter({ encoding: 'gpt9' as never })).toThrow(/o200k_base, cl100k_base/);
    expect(() => createTokenCounter({ worker: 'magic' as never })).toThrow(/'shared', 'dedicated' or 'none'/);
  });

  it('throws storage/closed after close()', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    counter.close();
    await expect(counter.countText('x')).rejects.toMatchObject({ code: 'storage/closed' });
  });

  it('a failed load of the encoding into this thread (a chunk fetch offline) is storage/failed, and the next count loads it again', async () => {
    const cause = new Error('chunk fetch failed');
    const load = vi.spyOn(IN_THREAD_ENCODINGS, 'o200k_base').mockRejectedValueOnce(cause);
    const counter = createTokenCounter({ worker: 'none' });
    try {
      await expect(counter.countText('hello world')).rejects.toMatchObject({
        code: 'storage/failed',
        message: 'Could not load the o200k_base encoding into this thread; check that the bundle serves its chunk. The next count tries again.',
        cause,
      });
      expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 0 });
      expect(await counter.countText('hello world')).toBe(2);
      expect(load).toHaveBeenCalledTimes(2);
      // Closing after a failed load leaves nothing unhandled either (Vitest fails the run on one).
      const closedEarly = createTokenCounter({ worker: 'none' });
      load.mockRejectedValueOnce(cause);
      await expect(closedEarly.ready).rejects.toMatchObject({ code: 'storage/failed' });
      closedEarly.close();
    } finally {
      load.mockRestore();
      counter.close();
    }
  });

  it('after close(), a text it has counted before is refused too, not answered from the cache', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    const message: Message = { role: 'user', content: 'counted once' };
    const text = messageTokenText(message);
    await counter.count([message]);
    await counter.countText(text);
    counter.close();
    for (const call of [() => counter.count([message]), () => counter.countEach([message]), () => counter.measureEach([message]), () => counter.countText(text), () => counter.measureText(text)]) {
      await expect(call()).rejects.toMatchObject({ code: 'storage/closed' });
    }
    // The second count was the cache's: it had the answer, and still gave none after close().
    expect(counter.stats().cached).toBe(1);
  });
});

describe('estimates are never cached as exact (issue 10 item 8)', () => {
  // Many pre-tokens, so the text spans several windows and a budget of 0 runs out after the first.
  const long = 'word = value; '.repeat(15_000);
  const message: Message = { role: 'user', content: long };
  const exactTokens = o200k.countTokens(messageTokenText(message), plain) + MESSAGE_OVERHEAD_TOKENS;

  it('measureEach and measureText say exact: false when the in-thread budget runs out, and the next count counts again', async () => {
    const hurried = createTokenCounter({ worker: 'none', requestTimeoutMs: 0 });
    const [estimate] = await hurried.measureEach([message]);
    expect(estimate).toEqual({ tokens: expect.any(Number) as number, exact: false });
    expect(await hurried.measureText(long)).toMatchObject({ exact: false });
    expect(hurried.stats()).toMatchObject({ estimated: 2, counted: 0 });
    hurried.close();

    const patient = createTokenCounter({ worker: 'none' });
    expect(await patient.measureEach([message])).toEqual([{ tokens: exactTokens, exact: true }]);
    expect(await patient.countEach([message])).toEqual([exactTokens]);
    expect(patient.stats()).toMatchObject({ counted: 1, cached: 1 });
    patient.close();
  });

  it('a session does not store an estimate: reopened with a counter that has time, it counts exactly', async () => {
    const name = uniqueName();
    const first = await freshTabula({ name, tokenCounter: createTokenCounter({ worker: 'none', requestTimeoutMs: 0 }) });
    const session = await first.session('s');
    await session.append(message);
    const estimated = await session.tokens();
    expect(estimated).not.toBe(exactTokens);
    await first.close();

    const counter = createTokenCounter({ worker: 'none' });
    const second = await freshTabula({ name, tokenCounter: counter });
    const again = await second.session('s');
    expect(await again.tokens()).toBe(exactTokens);
    await second.close();
    counter.close();
  });
});
