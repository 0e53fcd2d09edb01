import { describe, expect, it } from 'vitest';
import { MessageSchema, isTabulaError, messageText, parseMessage, type Message } from '../../../src/core/index.js';

function refusal(value: unknown): { message: string; issues: { path: PropertyKey[] }[] } {
  try {
    parseMessage(value, 'messages[2]');
  } catch (error) {
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    return error as { message: string; issues: { path: PropertyKey[] }[] };
  }
  throw new Error('expected the message to be refused');
}

describe('MessageSchema', () => {
  it('accepts the OpenAI wire format, tool calls and content parts included', () => {
    const messages: Message[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } }], name: 'ann' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }] },
      { role: 'tool', content: '42', tool_call_id: 'call_1' },
      { role: 'assistant', content: '' },
    ];
    for (const message of messages) expect(MessageSchema.parse(message)).toEqual(message);
  });

  it('names the record and the field that is wrong', () => {
    const error = refusal({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: { q: 1 } } }],
    });
    expect(error.message).toMatch(/^messages\[2\] is not a valid chat message: tool_calls\[0\]\.function\.arguments:/);
    expect(error.issues[0]?.path).toEqual(['tool_calls', 0, 'function', 'arguments']);
  });

  it.each([
    ['an unknown role', { role: 'bot', content: 'x' }, 'role'],
    ['a tool message without its call id', { role: 'tool', content: 'x' }, 'tool_call_id'],
    ['tool calls on a user message', { role: 'user', content: 'x', tool_calls: [] }, 'tool_calls'],
    ['null content without tool calls', { role: 'assistant', content: null }, 'content'],
    ['an unknown field (refused, never silently dropped)', { role: 'user', content: 'x', mood: 'happy' }, ''],
    ['an empty name', { role: 'user', content: 'x', name: '' }, 'name'],
  ])('refuses %s', (_label, value, field) => {
    const error = refusal(value);
    expect(error.issues.map((issue) => issue.path.join('.'))).toContain(field);
  });

  it('returns a frozen copy, so a stored message cannot change under us', () => {
    const input = { role: 'user' as const, content: [{ type: 'text' as const, text: 'hi' }] };
    const parsed = parseMessage(input);
    expect(parsed).not.toBe(input);
    expect(Object.isFrozen(parsed)).toBe(true);
    expect(Object.isFrozen((parsed.content as unknown[])[0])).toBe(true);
    input.content[0]!.text = 'changed';
    expect(messageText(parsed)).toBe('hi');
  });

  it('reads the text of any content shape', () => {
    expect(messageText({ role: 'user', content: 'a' })).toBe('a');
    expect(messageText({ role: 'assistant', content: null, tool_calls: [] })).toBe('');
    expect(messageText({ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'u' } }, { type: 'text', text: 'b' }] })).toBe('ab');
  });
});
