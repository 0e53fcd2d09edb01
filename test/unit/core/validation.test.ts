import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { OpSchema, isTabulaError, parseMessage, parseOp } from '../../../src/core/index.js';
import { safeParse } from '../../../src/core/validation.js';
import type { SessionExport } from '../../../src/index.js';
import { PushRequestSchema } from '../../../src/sync/index.js';
import { parseWire } from '../../../src/sync/protocol.js';
import { freshTabula } from '../store/helpers.js';

/**
 * zod/mini has no messages of its own ("Invalid input" for everything); classic zod sets English
 * ones globally when any code in the process imports it (the app, a LangChain package, a test). These
 * tests take that global away, as in a page that never loads classic zod, so every refusal below must
 * get its English words from Tabula's own parse.
 */
let saved: z.core.$ZodConfig['localeError'];
beforeEach(() => {
  saved = z.config().localeError;
  z.config({ localeError: undefined });
});
afterEach(() => {
  z.config({ localeError: saved });
});

function refusalOf(run: () => unknown): { message: string; issues: { path: PropertyKey[]; message: string }[] } {
  try {
    run();
  } catch (error) {
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    return error as { message: string; issues: { path: PropertyKey[]; message: string }[] };
  }
  throw new Error('expected a schema/invalid refusal');
}

async function asyncRefusalOf(run: () => Promise<unknown>): Promise<{ message: string }> {
  const error: unknown = await run().then(
    () => new Error('expected a schema/invalid refusal'),
    (thrown: unknown) => thrown,
  );
  expect(isTabulaError(error, 'schema/invalid')).toBe(true);
  return error as { message: string };
}

const order = '000000000000001.000000.client';

describe('safeParse', () => {
  it('words zod/mini issues in English without any global zod configuration', () => {
    const result = safeParse(z.strictObject({ a: z.string(), n: z.number().check(z.int()) }), { a: 1, n: 1.5, b: true });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.message)).toEqual([
      'Invalid input: expected string, received number',
      'Invalid input: expected int, received number',
      'Unrecognized key: "b"',
    ]);
  });

  it('keeps a message a check sets itself', () => {
    const result = safeParse(z.string().check(z.minLength(1, 'give a name')), '');
    expect(result.error?.issues[0]?.message).toBe('give a name');
  });

  it('leaves the global zod configuration as it found it', () => {
    safeParse(z.string(), 1);
    expect(z.config().localeError).toBeUndefined();
  });
});

describe('every refusal names the field in English', () => {
  it('parseMessage', () => {
    const error = refusalOf(() => parseMessage({ role: 'user', content: 'hi', name: 5, tool_call_id: '' }, 'messages[2]'));
    expect(error.message).toBe(
      'messages[2] is not a valid chat message: name: Invalid input: expected string, received number; tool_call_id: Too small: expected string to have >=1 characters.',
    );
    expect(error.issues.map((issue) => issue.path)).toEqual([['name'], ['tool_call_id']]);
  });

  it('parseMessage refuses an unknown field rather than dropping it', () => {
    const error = refusalOf(() => parseMessage({ role: 'user', content: 'hi', extra: 1 }));
    expect(error.message).toBe('message is not a valid chat message: (root): Unrecognized key: "extra".');
  });

  it('parseOp', () => {
    const op = { id: 'o1', kind: 'journal.commit', userId: 'u', sessionId: 's', order, body: { watermark: -1 } };
    const error = refusalOf(() => parseOp(op, 'ops[0]'));
    expect(error.message).toBe('ops[0] is not a valid op: body.watermark: Too small: expected number to be >=0.');
    expect(refusalOf(() => parseOp({ ...op, body: { watermark: 1 }, extra: true })).message).toBe('op is not a valid op: (root): Unrecognized key: "extra".');
    expect(refusalOf(() => parseOp({ ...op, kind: 'nope' })).message).toContain("kind: Invalid discriminator value. Expected 'session.create' | 'session.delete'");
    expect(OpSchema.safeParse({ ...op, body: { watermark: 2 } }).success).toBe(true);
  });

  it('parseWire', () => {
    const error = refusalOf(() => parseWire(PushRequestSchema, { clientId: 'c', items: [] }, 'push body'));
    expect(error.message).toBe('push body is invalid: items: Too small: expected array to have >=1 items.');
  });

  it('importSession and save()', async () => {
    const tabula = await freshTabula();
    try {
      const bad = { format: 'tabula.session', formatVersion: 1, userId: 'u', sessionId: 's', createdAt: 'yesterday' } as unknown as SessionExport;
      const imported = await asyncRefusalOf(() => tabula.importSession(bad));
      expect(imported.message).toContain('createdAt: Invalid input: expected number, received string');
      const session = await tabula.session('s');
      const saved = await asyncRefusalOf(() => session.save({ summary: 7 } as never));
      expect(saved.message).toContain('summary: Invalid input: expected string, received number');
    } finally {
      await tabula.close();
    }
  });
});
