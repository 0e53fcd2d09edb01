import { describe, expect, it } from 'vitest';
import { MessageSchema, isTabulaError, messageText, parseMessage, type Message } from '../../../src/core/index.js';
import { parseMessages } from '../../../src/core/message.js';

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

describe('MessageSchema: the chat API rules, each with its own words', () => {
  const call = { id: 'call_1', type: 'function' as const, function: { name: 'lookup', arguments: '{}' } };

  it.each([
    ['a tool message without its call id', { role: 'tool', content: 'x' }, [['tool_call_id', 'a tool message must name the call it answers']]],
    ['a call id on a user message', { role: 'user', content: 'x', tool_call_id: 'call_1' }, [['tool_call_id', 'only a tool message answers a call']]],
    ['tool calls on a system message', { role: 'system', content: 'x', tool_calls: [call] }, [['tool_calls', 'only an assistant message makes tool calls']]],
    [
      'null content on a user message with tool calls',
      { role: 'user', content: null, tool_calls: [call] },
      [
        ['tool_calls', 'only an assistant message makes tool calls'],
        ['content', 'content may be null only on an assistant message with tool_calls; use "" for an empty message'],
      ],
    ],
    [
      'null content on an assistant message with an empty tool_calls list',
      { role: 'assistant', content: null, tool_calls: [] },
      [['content', 'content may be null only on an assistant message with tool_calls; use "" for an empty message']],
    ],
  ])('refuses %s', (_label, value, expected) => {
    const error = refusal(value);
    expect(error.issues.map((issue) => [(issue.path as string[]).join('.'), (issue as { message?: string }).message])).toEqual(expected);
    for (const issue of error.issues) expect((issue as { code?: string }).code).toBe('custom');
    expect(error.message).toBe(`messages[2] is not a valid chat message: ${expected.map(([path, text]) => `${path}: ${text}`).join('; ')}.`);
  });

  it.each([
    ['null', null],
    ['a string', 'hello'],
    ['a number', 3],
    ['undefined', undefined],
  ])('refuses %s as schema/invalid, never a TypeError', (_label, value) => {
    expect(refusal(value).message).toMatch(/^messages\[2\] is not a valid chat message: \(root\): /);
  });
});

describe('a StoredMessage is accepted as a message', () => {
  const stored = { role: 'user', content: 'hi', id: 'm1', order: '0001', createdAt: 5 };

  it.each(['complete', 'streaming', 'interrupted'])('drops the four storage fields of a %s message and keeps the rest', (status) => {
    const message = parseMessage({ ...stored, status, name: 'ann' });
    expect(message).toEqual({ role: 'user', content: 'hi', name: 'ann' });
    expect(Object.isFrozen(message)).toBe(true);
  });

  it.each([
    ['id', { id: 1 }],
    ['order', { order: 1 }],
    ['createdAt', { createdAt: '5' }],
    ['status', { status: 'done' }],
  ])('refuses the storage fields as unknown when %s is not a storage value', (field, override) => {
    const error = refusal({ ...stored, status: 'complete', ...override });
    expect(error.message).toContain('Unrecognized key');
    expect(error.message).toContain(`"${field}"`);
  });

  it('refuses a stray id alone as an unknown field', () => {
    expect(refusal({ role: 'user', content: 'x', id: 'm1' }).message).toContain('"id"');
  });
});

describe('parseMessages', () => {
  it('validates each message and names the bad one by index', () => {
    const messages = parseMessages(new Set([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }]));
    expect(messages.map(messageText)).toEqual(['a', 'b']);
    expect(messages.every((message) => Object.isFrozen(message))).toBe(true);
    expect(() => parseMessages([{ role: 'user', content: 'a' }, { role: 'bot', content: 'b' }])).toThrow(/^messages\[1\] is not a valid chat message: role:/);
    expect(() => parseMessages([{ role: 'bot', content: 'b' }], 'history')).toThrow(/^history\[0\] is not a valid chat message/);
  });
});
