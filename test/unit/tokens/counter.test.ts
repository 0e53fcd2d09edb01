import { describe, expect, it } from 'vitest';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { MESSAGE_OVERHEAD_TOKENS, createTokenCounter, messageTokenText, type Message } from '../../../src/index.js';
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
});
