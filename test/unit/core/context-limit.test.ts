/**
 * A WorkingContext exactly at its token limit is within it (src/core/context.ts,
 * `assertWithinLimit`): the limit is inclusive, one token less is over it.
 * Moved from the store's write-path tests, where it was written.
 */
import { describe, expect, it } from 'vitest';
import { ApproxTokenCounter, WorkingContext } from '../../../src/core/index.js';

describe('a context at its limit', () => {
  it('is within a limit equal to its count, and over a limit one less', async () => {
    const counter = new ApproxTokenCounter();
    const messages = [{ role: 'user' as const, content: 'x'.repeat(400) }];
    const tokens = await counter.count(messages);
    expect(tokens).toBeGreaterThan(1);
    await expect(new WorkingContext({ messages, tokenCounter: counter, limit: tokens }).assertWithinLimit()).resolves.toBe(tokens);
    await expect(new WorkingContext({ messages, tokenCounter: counter, limit: tokens - 1 }).assertWithinLimit()).rejects.toMatchObject({ code: 'context/over-limit' });
    await expect(new WorkingContext({ messages: [], tokenCounter: counter, limit: 0 }).assertWithinLimit()).resolves.toBe(0);
  });
});
