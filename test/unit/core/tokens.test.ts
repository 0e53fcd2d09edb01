import { describe, expect, it } from 'vitest';
import {
  ApproxTokenCounter,
  estimateMessageTokens,
  messageTokenText,
  type Message,
} from '../../../src/core/index.js';
import { IMAGE_PART_TOKENS, MESSAGE_OVERHEAD_TOKENS, messageFixedTokens } from '../../../src/core/tokens.js';

describe('estimateMessageTokens', () => {
  it('is ceil(chars / 4) of the token text plus the per-message overhead', () => {
    const message: Message = { role: 'user', content: 'hello world!' };
    expect(messageTokenText(message)).toBe('user\nhello world!');
    expect(estimateMessageTokens(message)).toBe(Math.ceil(17 / 4) + MESSAGE_OVERHEAD_TOKENS);
  });

  it('counts tool calls: a tool-heavy message is not free', () => {
    const bare: Message = { role: 'assistant', content: null, tool_calls: [] };
    const heavy: Message = {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'search', arguments: JSON.stringify({ q: 'x'.repeat(400) }) } }],
    };
    expect(messageTokenText(heavy)).toContain('search');
    expect(estimateMessageTokens(heavy) - estimateMessageTokens(bare)).toBeGreaterThan(100);
  });

  it('counts names, tool call ids, text parts and images', () => {
    expect(messageTokenText({ role: 'tool', content: 'r', tool_call_id: 'call_9' })).toBe('tool\nr\ncall_9');
    expect(messageTokenText({ role: 'user', name: 'ann', content: 'x' })).toBe('user\nann\nx');
    const withImage: Message = {
      role: 'user',
      content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: 'https://example.test/a.png' } }],
    };
    expect(messageTokenText(withImage)).toBe('user\nsee');
    expect(estimateMessageTokens(withImage)).toBe(Math.ceil(8 / 4) + MESSAGE_OVERHEAD_TOKENS + IMAGE_PART_TOKENS);
  });
});

describe('ApproxTokenCounter', () => {
  it('sums the estimates and is named approx', async () => {
    const counter = new ApproxTokenCounter();
    const messages: Message[] = [
      { role: 'user', content: 'a'.repeat(40) },
      { role: 'assistant', content: 'b'.repeat(8) },
    ];
    expect(counter.name).toBe('approx');
    expect(await counter.count(messages)).toBe(estimateMessageTokens(messages[0]!) + estimateMessageTokens(messages[1]!));
    expect(await counter.count([])).toBe(0);
  });
});

describe('fixed costs and counting each message', () => {
  it('charges IMAGE_PART_TOKENS per image part and nothing extra for text parts', () => {
    const message: Message = {
      role: 'user',
      content: [
        { type: 'text', text: 'a' },
        { type: 'image_url', image_url: { url: 'u' } },
        { type: 'text', text: 'b' },
      ],
    };
    expect(messageFixedTokens(message)).toBe(MESSAGE_OVERHEAD_TOKENS + IMAGE_PART_TOKENS);
    expect(messageFixedTokens({ role: 'user', content: 'abc' })).toBe(MESSAGE_OVERHEAD_TOKENS);
  });

  it('countEach gives one estimate per message, in order, summing to count', async () => {
    const counter = new ApproxTokenCounter();
    const messages: Message[] = [
      { role: 'user', content: 'x'.repeat(40) },
      { role: 'assistant', content: 'y' },
    ];
    const each = await counter.countEach(messages);
    expect(each).toEqual(messages.map(estimateMessageTokens));
    expect(each[0]).toBeGreaterThan(each[1]!);
    expect(each.reduce((a, b) => a + b, 0)).toBe(await counter.count(messages));
  });
});
