import { describe, expect, it } from 'vitest';
import { OpSchema, isTabulaError, makeOp, parseOp } from '../../../src/core/index.js';
import { emptyStateFields } from '../../../src/core/ops.js';

const order = '000000000000001.000000.client';

describe('ops', () => {
  it('emptyStateFields() is a new session state, fresh on every call', () => {
    const fields = emptyStateFields();
    expect(fields).toEqual({ summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} });
    fields.tools.push('search');
    fields.context.k = 1;
    expect(emptyStateFields()).toEqual({ summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} });
  });

  it('makeOp builds an op that parseOp accepts and returns as it is', () => {
    const op = makeOp('journal.commit', { id: 'o1', userId: 'u', sessionId: 's', order, after: '', body: { watermark: 2 } });
    expect(op).toEqual({ id: 'o1', kind: 'journal.commit', userId: 'u', sessionId: 's', order, after: '', body: { watermark: 2 } });
    expect(parseOp(op)).toEqual(op);
    expect(OpSchema.safeParse(op).success).toBe(true);
  });

  it('parseOp keeps zod issues whole on the error', () => {
    const bad = { id: 'o1', kind: 'journal.commit', userId: 'u', sessionId: 's', order, body: { watermark: -1 } };
    try {
      parseOp(bad, 'ops[3]');
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toMatch(/^ops\[3\] is not a valid op: body\.watermark: /);
      expect((error as { issues: unknown[] }).issues).toMatchObject([{ path: ['body', 'watermark'], code: 'too_small' }]);
    }
  });
});
