/**
 * The hand-written check of message rows (message-row.ts), one rule at a time:
 * a valid row, then the same row with one field wrong, each case pinned to the
 * verdict of the zod schema it stands in for (so a case cannot drift from
 * zod), and the error a bad row gets naming its key. The property test
 * (message-row.property.test.ts) searches the same ground at random; these
 * cases make every check fail on its own, fast enough for mutation runs.
 */
import { describe, expect, it } from 'vitest';
import { checkMessageRow, isValidMessageRow } from '../../../src/store/message-row.js';
import { checkRow } from '../../../src/store/db/rows.js';
import { verdictOf, zodAcceptsMessageRow } from './helpers.js';

type Fields = Record<string, unknown>;

/** A valid complete row; each case changes one thing of it. */
const baseRow = (): Fields => ({
  id: 'm1',
  userId: 'alice',
  sessionId: 's1',
  order: '0001',
  createdAt: 5,
  status: 'complete',
  message: { role: 'user', content: 'hi' },
});

const call = (fields: Fields = {}): Fields => ({ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' }, ...fields });
const fn = (fields: Fields): Fields => call({ function: { name: 'f', arguments: '{}', ...fields } });
const textPart = (fields: Fields = {}): Fields => ({ type: 'text', text: 'a', ...fields });
const imagePart = (fields: Fields = {}): Fields => ({ type: 'image_url', image_url: { url: 'data:x' }, ...fields });

/** The base row with `fields` set (a value of `absent` removes the key). */
const absent = Symbol('absent');
const row = (fields: Fields): Fields => {
  const out = baseRow();
  for (const [key, value] of Object.entries(fields)) {
    if (value === absent) delete out[key];
    else out[key] = value;
  }
  return out;
};
/** The base row with its message replaced by `message`. */
const withMessage = (message: unknown): Fields => row({ message });

/** Another prototype than Object's: IndexedDB never returns one, zod's z.object accepts it. */
class Custom {
  constructor(fields: Fields) {
    Object.assign(this, fields);
  }
}

const nullProto = (fields: Fields): Fields => Object.assign(Object.create(null) as Fields, fields);

const keyOf = (value: unknown): unknown[] => {
  const fields = typeof value === 'object' && value !== null ? (value as Fields) : {};
  return [fields.userId, fields.sessionId, fields.id];
};

const VALID: Array<[string, unknown]> = [
  ['a complete user message', baseRow()],
  ['a streaming row with its marker', row({ status: 'streaming', streaming: 1 })],
  ['an interrupted row', row({ status: 'interrupted' })],
  ['empty id, userId, sessionId and updateOrder (only the order must not be empty)', row({ id: '', userId: '', sessionId: '', updateOrder: '' })],
  ['an updateOrder', row({ updateOrder: '0002' })],
  ['cached token counts', row({ tokens: { o200k_base: 4, cl100k_base: 2.5, zero: 0, negative: -1 } })],
  ['no token counts yet', row({ tokens: {} })],
  ['a negative createdAt', row({ createdAt: -3.5 })],
  ['a key the row schema does not know (rows are not strict)', row({ later: 'field' })],
  ['explicitly undefined optional fields', row({ tokens: undefined, updateOrder: undefined, streaming: undefined })],
  ['null-prototype row and message', nullProto({ ...baseRow(), message: nullProto({ role: 'user', content: 'hi' }) })],
  ['a null-prototype token record', row({ tokens: nullProto({ a: 1 }) })],
  ['every role', withMessage({ role: 'system', content: 'be brief' })],
  ['an assistant message', withMessage({ role: 'assistant', content: 'ok' })],
  ['an empty string content', withMessage({ role: 'user', content: '' })],
  ['an empty parts array', withMessage({ role: 'user', content: [] })],
  ['text and image parts', withMessage({ role: 'user', content: [textPart(), imagePart(), textPart({ text: '' })] })],
  ['null-prototype parts and image_url', withMessage({ role: 'user', content: [nullProto(textPart()), nullProto({ type: 'image_url', image_url: nullProto({ url: 'u' }) })] })],
  ['a name', withMessage({ role: 'user', content: 'hi', name: 'ann' })],
  ['an explicitly undefined name', withMessage({ role: 'user', content: 'hi', name: undefined })],
  ['null content with tool calls', withMessage({ role: 'assistant', content: null, tool_calls: [call()] })],
  ['text content with two tool calls', withMessage({ role: 'assistant', content: 'calling', tool_calls: [call(), call({ id: 'c2' })] })],
  ['text content with an empty tool_calls array', withMessage({ role: 'assistant', content: 'none', tool_calls: [] })],
  ['empty call arguments', withMessage({ role: 'assistant', content: null, tool_calls: [fn({ arguments: '' })] })],
  ['null-prototype call and function', withMessage({ role: 'assistant', content: null, tool_calls: [nullProto({ id: 'c', type: 'function', function: nullProto({ name: 'f', arguments: '' }) })] })],
  ['a tool answer', withMessage({ role: 'tool', content: '42', tool_call_id: 'c1' })],
];

const INVALID: Array<[string, unknown]> = [
  ['null', null],
  ['undefined', undefined],
  ['a string', 'row'],
  ['a number', 7],
  ['an array', [baseRow()]],
  ['a numeric id', row({ id: 1 })],
  ['no id', row({ id: absent })],
  ['a null userId', row({ userId: null })],
  ['no userId', row({ userId: absent })],
  ['a numeric sessionId', row({ sessionId: 2 })],
  ['no sessionId', row({ sessionId: absent })],
  ['an empty order', row({ order: '' })],
  ['an order in an array', row({ order: ['0001'] })],
  ['a numeric order', row({ order: 1 })],
  ['no order', row({ order: absent })],
  ['a createdAt string', row({ createdAt: '5' })],
  ['a NaN createdAt', row({ createdAt: NaN })],
  ['an infinite createdAt', row({ createdAt: Infinity })],
  ['a -infinite createdAt', row({ createdAt: -Infinity })],
  ['no createdAt', row({ createdAt: absent })],
  ['an unknown status', row({ status: 'done' })],
  ['a numeric status', row({ status: 1 })],
  ['no status', row({ status: absent })],
  ['a marker on a complete row', row({ streaming: 1 })],
  ['a marker on an interrupted row', row({ status: 'interrupted', streaming: 1 })],
  ['a streaming row without its marker', row({ status: 'streaming' })],
  ['a marker of 0', row({ status: 'streaming', streaming: 0 })],
  ['a marker of "1"', row({ status: 'streaming', streaming: '1' })],
  ['a marker of true', row({ status: 'streaming', streaming: true })],
  ['a marker of 0 on a complete row', row({ streaming: 0 })],
  ['a numeric updateOrder', row({ updateOrder: 2 })],
  ['a null updateOrder', row({ updateOrder: null })],
  ['null tokens', row({ tokens: null })],
  ['tokens as an array', row({ tokens: [] })],
  ['tokens as an array of numbers', row({ tokens: [1, 2] })],
  ['tokens of another prototype', row({ tokens: new Custom({ a: 1 }) })],
  ['tokens as a date', row({ tokens: new Date(0) })],
  ['a token count string', row({ tokens: { a: '1' } })],
  ['a NaN token count', row({ tokens: { a: 1, b: NaN } })],
  ['a token count under a symbol key', row({ tokens: { a: 1, [Symbol('s')]: 2 } })],
  ['no message', row({ message: absent })],
  ['a string message', withMessage('hi')],
  ['a null message', withMessage(null)],
  ['a message array', withMessage([{ role: 'user', content: 'hi' }])],
  ['a message key the schema does not know', withMessage({ role: 'user', content: 'hi', extra: 1 })],
  ['an undefined unknown message key', withMessage({ role: 'user', content: 'hi', extra: undefined })],
  ['an unknown role', withMessage({ role: 'bot', content: 'hi' })],
  ['a numeric role', withMessage({ role: 1, content: 'hi' })],
  ['no role', withMessage({ content: 'hi' })],
  ['numeric content', withMessage({ role: 'user', content: 1 })],
  ['object content', withMessage({ role: 'user', content: { type: 'text', text: 'a' } })],
  ['no content', withMessage({ role: 'user' })],
  ['null content on a user message', withMessage({ role: 'user', content: null })],
  ['null content on an assistant message without calls', withMessage({ role: 'assistant', content: null })],
  ['null content with an empty tool_calls array', withMessage({ role: 'assistant', content: null, tool_calls: [] })],
  ['null content on a tool answer', withMessage({ role: 'tool', content: null, tool_call_id: 'c1' })],
  ['a null part', withMessage({ role: 'user', content: [null] })],
  ['a string part', withMessage({ role: 'user', content: ['a'] })],
  ['a part of another type', withMessage({ role: 'user', content: [{ type: 'video', url: 'u' }] })],
  ['a part without a type', withMessage({ role: 'user', content: [{ text: 'a' }] })],
  ['an image part of another type', withMessage({ role: 'user', content: [{ type: 'image', image_url: { url: 'u' } }] })],
  ['an image part without a type', withMessage({ role: 'user', content: [{ image_url: { url: 'u' } }] })],
  ['a bad part after a good one', withMessage({ role: 'user', content: [textPart(), textPart({ text: 1 })] })],
  ['a bad part before a good one', withMessage({ role: 'user', content: [textPart({ text: 1 }), textPart()] })],
  ['a text part without text', withMessage({ role: 'user', content: [{ type: 'text' }] })],
  ['a numeric text', withMessage({ role: 'user', content: [textPart({ text: 1 })] })],
  ['a text part with an unknown key', withMessage({ role: 'user', content: [textPart({ extra: 'x' })] })],
  ['a text part with an image_url', withMessage({ role: 'user', content: [textPart({ image_url: { url: 'u' } })] })],
  ['an image part with text', withMessage({ role: 'user', content: [imagePart({ text: 'a' })] })],
  ['an image part with an unknown key', withMessage({ role: 'user', content: [imagePart({ extra: 1 })] })],
  ['an image part without image_url', withMessage({ role: 'user', content: [{ type: 'image_url' }] })],
  ['an image_url string', withMessage({ role: 'user', content: [imagePart({ image_url: 'data:x' })] })],
  ['an image_url array', withMessage({ role: 'user', content: [imagePart({ image_url: ['u'] })] })],
  ['an image_url with an unknown key', withMessage({ role: 'user', content: [imagePart({ image_url: { url: 'u', detail: 'low' } })] })],
  ['an empty image url', withMessage({ role: 'user', content: [imagePart({ image_url: { url: '' } })] })],
  ['a numeric image url', withMessage({ role: 'user', content: [imagePart({ image_url: { url: 1 } })] })],
  ['an image url in an array', withMessage({ role: 'user', content: [imagePart({ image_url: { url: ['u'] } })] })],
  ['an empty name', withMessage({ role: 'user', content: 'hi', name: '' })],
  ['a numeric name', withMessage({ role: 'user', content: 'hi', name: 1 })],
  ['a name in an array', withMessage({ role: 'user', content: 'hi', name: ['ann'] })],
  ['a null name', withMessage({ role: 'user', content: 'hi', name: null })],
  ['tool_calls as an object', withMessage({ role: 'assistant', content: 'x', tool_calls: { 0: call() } })],
  ['null tool_calls', withMessage({ role: 'assistant', content: 'x', tool_calls: null })],
  ['a null call', withMessage({ role: 'assistant', content: 'x', tool_calls: [null] })],
  ['a bad call after a good one', withMessage({ role: 'assistant', content: 'x', tool_calls: [call(), call({ id: '' })] })],
  ['a call with an unknown key', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ extra: 1 })] })],
  ['a call with an empty id', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ id: '' })] })],
  ['a call with a numeric id', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ id: 1 })] })],
  ['a call with an id in an array', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ id: ['c'] })] })],
  ['a call without an id', withMessage({ role: 'assistant', content: 'x', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '' } }] })],
  ['a call of another type', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ type: 'tool' })] })],
  ['a call without a type', withMessage({ role: 'assistant', content: 'x', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '' } }] })],
  ['a call without a function', withMessage({ role: 'assistant', content: 'x', tool_calls: [{ id: 'c', type: 'function' }] })],
  ['a call whose function is a string', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ function: 'f' })] })],
  ['a function with an unknown key', withMessage({ role: 'assistant', content: 'x', tool_calls: [fn({ strict: true })] })],
  ['a function with an empty name', withMessage({ role: 'assistant', content: 'x', tool_calls: [fn({ name: '' })] })],
  ['a function with a numeric name', withMessage({ role: 'assistant', content: 'x', tool_calls: [fn({ name: 1 })] })],
  ['a function with a name in an array', withMessage({ role: 'assistant', content: 'x', tool_calls: [fn({ name: ['f'] })] })],
  ['a function with object arguments', withMessage({ role: 'assistant', content: 'x', tool_calls: [fn({ arguments: {} })] })],
  ['a function without arguments', withMessage({ role: 'assistant', content: 'x', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f' } }] })],
  ['tool calls on a user message', withMessage({ role: 'user', content: 'x', tool_calls: [call()] })],
  ['empty tool calls on a user message', withMessage({ role: 'user', content: 'x', tool_calls: [] })],
  ['tool calls on a tool answer', withMessage({ role: 'tool', content: 'x', tool_call_id: 'c1', tool_calls: [] })],
  ['a tool answer without its call id', withMessage({ role: 'tool', content: '42' })],
  ['a call id on a user message', withMessage({ role: 'user', content: 'x', tool_call_id: 'c1' })],
  ['a call id on an assistant message', withMessage({ role: 'assistant', content: 'x', tool_call_id: 'c1' })],
  ['an empty call id', withMessage({ role: 'tool', content: 'x', tool_call_id: '' })],
  ['a numeric call id', withMessage({ role: 'tool', content: 'x', tool_call_id: 1 })],
  ['a call id in an array', withMessage({ role: 'tool', content: 'x', tool_call_id: ['c1'] })],
];

/** Objects of another prototype anywhere: the check is unsure and says no; zod, which accepts them, decides. */
const UNSURE: Array<[string, unknown]> = [
  ['a row of another prototype', new Custom(baseRow())],
  ['a message of another prototype', withMessage(new Custom({ role: 'user', content: 'hi' }))],
  ['a part of another prototype', withMessage({ role: 'user', content: [new Custom(textPart())] })],
  ['an image_url of another prototype', withMessage({ role: 'user', content: [imagePart({ image_url: new Custom({ url: 'u' }) })] })],
  ['a call of another prototype', withMessage({ role: 'assistant', content: 'x', tool_calls: [new Custom(call())] })],
  ['a call whose function has another prototype', withMessage({ role: 'assistant', content: 'x', tool_calls: [call({ function: new Custom({ name: 'f', arguments: '' }) })] })],
];

describe('message rows: each rule of the hand-written check, as zod decides it', () => {
  it.each(VALID)('accepts %s, returning the row itself', (_name, value) => {
    expect(zodAcceptsMessageRow(value)).toBe(true);
    expect(isValidMessageRow(value)).toBe(true);
    expect(checkMessageRow(value)).toBe(value);
  });

  it.each(INVALID)("refuses %s, with zod's error naming the row's key", (_name, value) => {
    expect(zodAcceptsMessageRow(value)).toBe(false);
    expect(isValidMessageRow(value)).toBe(false);
    const error = verdictOf(() => checkMessageRow(value));
    expect(error).toMatch(/^schema\/invalid: /);
    expect(error).toBe(verdictOf(() => checkRow('messages', keyOf(value), value)));
  });

  it.each(UNSURE)('leaves %s to zod, which accepts it', (_name, value) => {
    expect(isValidMessageRow(value)).toBe(false);
    expect(checkMessageRow(value)).toBe(value);
  });

  it('names the table, the key and the bad field of a refused row, and how to repair it', () => {
    expect(() => checkMessageRow(row({ order: '' }))).toThrow(
      expect.objectContaining({
        code: 'schema/invalid',
        message: expect.stringMatching(/^Row \["alice","s1","m1"\] of IndexedDB table "messages" is corrupt .*order.*delete or re-import this session/) as unknown,
      }),
    );
    // A value that is not an object has no key to name; it is refused all the same, by a TabulaError.
    expect(() => checkMessageRow(null)).toThrow(expect.objectContaining({ code: 'schema/invalid', message: expect.stringContaining('Row [null,null,null] of IndexedDB table "messages"') as unknown }));
  });
});
