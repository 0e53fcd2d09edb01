/**
 * The counter openTabula() makes when the app passes none
 * (src/store/default-counter.ts): o200k_base, its code loaded on the first
 * count. In Node there is no SharedWorker nor Worker, so the counter it
 * loads counts in the calling thread, with the same numbers. The class of
 * bug this guards: a count from another encoding, a method wired to the
 * wrong one (count vs countEach vs measureEach), and a close() that leaves
 * the loaded counter, or one still loading, usable; a failed load of its
 * code that is not a TabulaError, or that is never tried again.
 */
import { describe, expect, it } from 'vitest';
import type { Message } from '../../../src/core/message.js';
import type { TokenMeasure } from '../../../src/core/tokens.js';
import { lazyWorkerCounter, type OwnedTokenCounter } from '../../../src/store/default-counter.js';
import { createTokenCounter } from '../../../src/tokens/counter.js';

/** Texts no counter here has counted yet, so a refusal after close() is not the cache's doing. */
const fresh = (tag: string): Message[] => [{ role: 'user', content: `not counted before: ${tag}` }];

/** The counter's optional methods, which this counter has. */
function countEach(counter: OwnedTokenCounter, list: readonly Message[]): Promise<number[]> {
  if (!counter.countEach) throw new Error('the default counter has countEach');
  return counter.countEach(list);
}
function measureEach(counter: OwnedTokenCounter, list: readonly Message[]): Promise<TokenMeasure[]> {
  if (!counter.measureEach) throw new Error('the default counter has measureEach');
  return counter.measureEach(list);
}

const messages: Message[] = [
  { role: 'system', content: 'You are a terse assistant.' },
  // o200k_base counts this in 8 tokens, cl100k_base in 15.
  { role: 'user', content: 'こんにちは世界、今日はいい天気ですね' },
];

describe('the default token counter', () => {
  it('counts with o200k_base: the same numbers as createTokenCounter, per method', { timeout: 60_000 }, async () => {
    const lazy = lazyWorkerCounter();
    const reference = createTokenCounter({ encoding: 'o200k_base', worker: 'none' });
    const cl100k = createTokenCounter({ encoding: 'cl100k_base', worker: 'none' });
    try {
      expect(lazy.name).toBe('o200k_base');
      const each = await reference.countEach(messages);
      // The two encodings disagree on this text, so a match below rules out the other one.
      expect(await cl100k.countEach(messages)).not.toEqual(each);
      expect(await countEach(lazy, messages)).toEqual(each);
      expect(await lazy.count(messages)).toBe(await reference.count(messages));
      expect(await lazy.count(messages)).toBe(each.reduce((a, b) => a + b, 0));
      expect(await measureEach(lazy, messages)).toEqual(await reference.measureEach(messages));
      expect((await measureEach(lazy, messages)).map((m) => m.tokens)).toEqual(each);
    } finally {
      lazy.close();
      reference.close();
      cl100k.close();
    }
  });

  it('closed after it loaded: a count refuses with storage/closed', { timeout: 60_000 }, async () => {
    const lazy = lazyWorkerCounter();
    expect(await lazy.count(messages)).toBeGreaterThan(0);
    lazy.close();
    await expect(lazy.count(fresh('a'))).rejects.toMatchObject({ code: 'storage/closed' });
    await expect(countEach(lazy, fresh('b'))).rejects.toMatchObject({ code: 'storage/closed' });
  });

  it('closed while its code loads, or before any count: a count refuses with storage/closed', { timeout: 60_000 }, async () => {
    const loading = lazyWorkerCounter();
    const first = measureEach(loading, messages);
    loading.close();
    await expect(first).rejects.toMatchObject({ code: 'storage/closed' });
    await expect(loading.count(messages)).rejects.toMatchObject({ code: 'storage/closed' });

    const unused = lazyWorkerCounter();
    unused.close();
    await expect(countEach(unused, messages)).rejects.toMatchObject({ code: 'storage/closed' });
  });

  it('a failed load of its code (a chunk fetch offline) is storage/failed, and the next count loads it again', { timeout: 60_000 }, async () => {
    const cause = new Error('chunk fetch failed');
    let loads = 0;
    const lazy = lazyWorkerCounter(async () => {
      loads += 1;
      if (loads === 1) throw cause;
      return import('../../../src/tokens/counter.js');
    });
    try {
      await expect(lazy.count(messages)).rejects.toMatchObject({
        code: 'storage/failed',
        message: 'Could not load the token counter code; check that the bundle serves its lazy chunk. The next count tries again.',
        cause,
      });
      const reference = createTokenCounter({ encoding: 'o200k_base', worker: 'none' });
      expect(await lazy.count(messages)).toBe(await reference.count(messages));
      reference.close();
      expect(loads).toBe(2);
    } finally {
      lazy.close();
    }
  });
});
