/**
 * The hand-written check of message rows (message-row.ts) against the zod
 * schema of the messages table it stands in for: on generated rows, valid
 * and broken in every field, nested message parts and tool calls included,
 * both accept exactly the same rows, and a bad row gets zod's error.
 * Seeded (test/unit/seed.ts): the seed is printed; TABULA_SEED=<n> replays it (Node).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkMessageRow, isValidMessageRow } from '../../../src/store/message-row.js';
import { checkRow, messageRow } from '../../../src/store/db/rows.js';
import { verdictOf, zodAcceptsMessageRow } from './helpers.js';
import { fcParams, TEST_SEED } from '../seed.js';

/** Values that break a field of almost any type. */
const odd = fc.constantFrom<unknown>(undefined, null, 0, -0, 1, NaN, Infinity, -Infinity, '', 'x', true, [], {}, [1], { a: 1 });

/** `good` most of the time, anything odd otherwise. */
const mostly = <T,>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 40, arbitrary: good }, { weight: 1, arbitrary: odd }, { weight: 1, arbitrary: fc.anything() });

/** `arbitrary` now and then, else null. */
const rarely = <T,>(arbitrary: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.oneof({ weight: 12, arbitrary: fc.constant(null) }, { weight: 1, arbitrary });

/** An object with some keys of `fields` left out, and sometimes a key the schema does not know. */
const objectOf = (fields: Record<string, fc.Arbitrary<unknown>>, optional: readonly string[] = []): fc.Arbitrary<unknown> =>
  fc
    .record({
      ...fields,
      dropped: rarely(fc.constantFrom(...Object.keys(fields))),
      keepOptional: fc.subarray([...optional]),
      extra: rarely(fc.tuple(fc.constantFrom('extra', 'role', 'id', '__proto__', 'type', 'constructor'), odd)),
    })
    .map(({ dropped, keepOptional, extra, ...values }) => {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(values)) {
        if (dropped === key || (optional.includes(key) && !keepOptional.includes(key))) continue;
        out[key] = value;
      }
      if (extra) Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true, configurable: true, writable: true });
      return out;
    });

const nonEmpty = fc.string({ minLength: 1, maxLength: 6 });
const part = fc.oneof(
  objectOf({ type: mostly(fc.constant('text')), text: mostly(fc.string({ maxLength: 6 })) }),
  objectOf({ type: mostly(fc.constant('image_url')), image_url: mostly(objectOf({ url: mostly(fc.string({ maxLength: 6 })) })) }),
);
const toolCall = objectOf({
  id: mostly(fc.string({ maxLength: 4 })),
  type: mostly(fc.constant('function')),
  function: mostly(objectOf({ name: mostly(fc.string({ maxLength: 4 })), arguments: mostly(fc.string({ maxLength: 4 })) })),
});
const message = objectOf(
  {
    role: mostly(fc.constantFrom('system', 'user', 'assistant', 'tool', 'bot')),
    content: mostly(fc.oneof(fc.string({ maxLength: 8 }), fc.constant(null), fc.array(part, { maxLength: 3 }))),
    name: mostly(fc.string({ maxLength: 3 })),
    tool_calls: mostly(fc.array(toolCall, { maxLength: 2 })),
    tool_call_id: mostly(fc.string({ maxLength: 3 })),
  },
  ['name', 'tool_calls', 'tool_call_id'],
);
const row = objectOf(
  {
    id: mostly(fc.string({ maxLength: 4 })),
    userId: mostly(fc.string({ maxLength: 4 })),
    sessionId: mostly(fc.string({ maxLength: 4 })),
    order: mostly(fc.string({ maxLength: 4 })),
    createdAt: mostly(fc.double()),
    status: mostly(fc.constantFrom('complete', 'streaming', 'interrupted', 'done')),
    message: mostly(message),
    tokens: mostly(fc.dictionary(nonEmpty, mostly(fc.double()), { maxKeys: 3 })),
    updateOrder: mostly(fc.string({ maxLength: 4 })),
    streaming: mostly(fc.constantFrom(1, 0, '1')),
  },
  ['tokens', 'updateOrder', 'streaming'],
);
/** Most rows with a streaming status get their marker, so rows both valid and broken by the marker rule are common. */
const marked = fc.tuple(row, fc.nat(3)).map(([value, dice]) => {
  if (dice === 0 || typeof value !== 'object' || value === null) return value;
  const r = value as Record<string, unknown>;
  return r.status === 'streaming' && !('streaming' in r) ? { ...r, streaming: 1 } : r;
});

describe('message rows: the hand-written check and the zod schema (property)', () => {
  it(`accept exactly the same rows, and a bad row gets zod's error (seed ${TEST_SEED})`, () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof({ weight: 8, arbitrary: marked }, { weight: 1, arbitrary: fc.anything() }), (value) => {
        const zod = zodAcceptsMessageRow(value);
        expect(isValidMessageRow(value)).toBe(zod);
        if (zod) accepted++;
        const key = typeof value === 'object' && value !== null ? value as Record<string, unknown> : {};
        expect(verdictOf(() => checkMessageRow(value))).toBe(verdictOf(() => checkRow('messages', [key.userId, key.sessionId, key.id], value)));
      }),
      fcParams(3000),
    );
    // The generator reaches both sides: a check that said no to everything would not pass unnoticed.
    expect(accepted).toBeGreaterThan(30);
  });

  it('accepts the rows Tabula writes: plain text, parts, tool calls and their answers, streaming, cached token counts', () => {
    const base = { id: 'm', userId: 'u', sessionId: 's', order: '1', createdAt: 1, status: 'complete' as const };
    const rows = [
      messageRow({ ...base, message: { role: 'user', content: 'hi' } }),
      messageRow({ ...base, status: 'streaming', message: { role: 'assistant', content: '' } }),
      messageRow({ ...base, message: { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'data:x' } }], name: 'ann' } }),
      messageRow({ ...base, message: { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] } }),
      messageRow({ ...base, message: { role: 'tool', content: '42', tool_call_id: 'c' }, updateOrder: '2' }),
      { ...messageRow({ ...base, message: { role: 'system', content: 'be brief' } }), tokens: { o200k_base: 4 } },
    ];
    for (const r of rows) {
      expect(zodAcceptsMessageRow(r)).toBe(true);
      expect(isValidMessageRow(r)).toBe(true);
      expect(checkMessageRow(r)).toBe(r);
    }
  });
});
