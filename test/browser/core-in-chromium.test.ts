/**
 * The pure core in a real browser: its own suite runs here too (see
 * vite.config.ts); this file checks what only a browser can: a frozen
 * context crossing a real MessageChannel as data and rebuilding equal.
 */
import { describe, expect, it } from 'vitest';
import { PrefixContext, WorkingContext, fromFrozenData, lastTurns, toFrozenData } from '../../src/core/index.js';

function postThroughChannel<T>(value: T): Promise<T> {
  const channel = new MessageChannel();
  return new Promise<T>((resolve) => {
    channel.port2.onmessage = (event: MessageEvent<T>) => {
      channel.port1.close();
      channel.port2.close();
      resolve(event.data);
    };
    channel.port1.postMessage(value);
  });
}

describe('core in Chromium', () => {
  it('runs in a real browser, not Node', () => {
    expect(typeof window).toBe('object');
    expect(navigator.userAgent).toMatch(/Chrome/);
  });

  it('a frozen context crosses a MessageChannel as data and rebuilds equal', async () => {
    const ctx = new WorkingContext({
      prefix: new PrefixContext({ systemPrompt: 'You plan trips.' }),
      messages: [
        { role: 'user', content: 'Paris in May?', name: 'ann' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', content: '18°C', tool_call_id: 'c1' },
      ],
      scratchpad: { plan: { days: 3, cities: ['Paris'] } },
    });
    const frozen = ctx.freeze();
    // Structured clone copies data, not classes or methods: send the data form, rebuild on arrival.
    const rebuilt = fromFrozenData(await postThroughChannel(toFrozenData(frozen)));
    expect(rebuilt.equals(frozen)).toBe(true);
    expect(rebuilt.key()).toBe(frozen.key());
    expect(WorkingContext.fromFrozen(rebuilt).slice(lastTurns(1)).messages).toHaveLength(3);
  });
});
