/**
 * The wire schemas both ends validate with: what they accept and how a
 * refusal names the field.
 */
import { describe, expect, it } from 'vitest';
import { makeOp } from '../../../src/core/index.js';
import { PullResponseSchema, PushRequestSchema } from '../../../src/sync/index.js';
import { Base64Schema, parseWire } from '../../../src/sync/protocol.js';
import { ErrorResponseSchema, PokeEventSchema, findDriftedOrder } from '../../../src/sync/protocol.js';

const op = makeOp('memory.set', { id: 'm1', userId: 'alice', sessionId: 's', order: '001700000000000.000000.c1', body: { scope: 'user', key: 'k', value: 1 } });

describe('sync protocol', () => {
  it('accepts op and board items, and refuses an item with both or neither', () => {
    expect(parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1, op }, { seq: 2, board: { sessionId: 's', update: 'AAA=' } }] }, 'push').items).toHaveLength(2);
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1, op, board: { sessionId: 's', update: 'AAA=' } }] }, 'push')).toThrow(/items\[0\]/);
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1 }] }, 'push')).toThrow(/exactly one/);
  });

  it('names the field of a bad op, seq or client id', () => {
    const bad = { ...op, body: { ...op.body, key: '' } };
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1, op: bad }] }, 'push')).toThrow(/items\[0\]\.op\.body\.key/);
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1.5, op }] }, 'push')).toThrow(/items\[0\]\.seq/);
    expect(() => parseWire(PushRequestSchema, { clientId: 'has space', items: [{ seq: 1, op }] }, 'push')).toThrow(expect.objectContaining({ code: 'schema/invalid', message: expect.stringContaining('clientId') as string }));
  });

  it('takes only padded standard base64', () => {
    for (const ok of ['', 'AA==', 'AAA=', 'AAAA', 'ab+/']) expect(Base64Schema.safeParse(ok).success, ok).toBe(true);
    for (const bad of ['A', 'AA', 'AA=', 'ab-_', 'AAAA=', 'A===']) expect(Base64Schema.safeParse(bad).success, bad).toBe(false);
  });

  it('validates a pull answer, a compacted board update with clientId null included', () => {
    const page = { items: [{ clientId: 'c1', op }, { clientId: null, board: { sessionId: 's', update: 'AAA=' } }], cursor: '2', more: false };
    expect(PullResponseSchema.parse(page)).toEqual(page);
    expect(PullResponseSchema.safeParse({ ...page, cursor: 'x' }).success).toBe(false);
  });

  it('carries the session life an op or a board update names, and refuses one that is not a delete\'s order key before the op', () => {
    const delOrder = '001699999999999.000000.c2';
    const items = [
      { seq: 1, op: { ...op, after: '' } },
      { seq: 2, op: { ...op, id: 'm2', after: delOrder } },
      { seq: 3, board: { sessionId: 's', update: 'AAA=', after: delOrder } },
    ];
    expect(parseWire(PushRequestSchema, { clientId: 'c1', items }, 'push').items).toEqual(items);
    // A life that begins after the op itself would let a replayed op end lives it never saw.
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1, op: { ...op, after: op.order } }] }, 'push')).toThrow(/items\[0\]\.op\.after/);
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1, op: { ...op, after: 'yesterday' } }] }, 'push')).toThrow(/items\[0\]\.op\.after/);
    expect(() => parseWire(PushRequestSchema, { clientId: 'c1', items: [{ seq: 1, board: { sessionId: 's', update: 'AAA=', after: 'x' } }] }, 'push')).toThrow(/items\[0\]\.board\.after/);
  });

  it('carries the server\'s time on a poke and its head on a pull\'s gap, and finds the order keys too far ahead', () => {
    expect(PokeEventSchema.safeParse({ cursor: '3', time: 1_700_000_000_000 }).success).toBe(true);
    for (const time of [-1, 1.5, '1']) expect(PokeEventSchema.safeParse({ cursor: '3', time }).success, String(time)).toBe(false);
    expect(ErrorResponseSchema.parse({ error: { code: 'sync/gap', message: 'reset', head: 2 } }).error.head).toBe(2);
    const now = 1_700_000_000_000;
    const at = (wallMs: number) => `${String(wallMs).padStart(15, '0')}.000000.c1`;
    expect(findDriftedOrder({ ...op, order: at(now + 1000) }, now, 1000)).toBeNull();
    expect(findDriftedOrder({ ...op, order: `${at(now + 1001)}#00000001` }, now, 1000)).toBe('order');
    const update = makeOp('message.update', { id: 'u', userId: 'alice', sessionId: 's', order: at(now), body: { id: 'm', status: 'complete', message: { role: 'user', content: 'x' }, order: at(now + 5000), createdAt: now } });
    expect(findDriftedOrder(update, now, 1000)).toBe('body.order');
  });
});
