/**
 * A session's `state.context` checked against its contextSchema
 * (src/store/context-schema.ts), for save() and for a run's context alike.
 * The class of bug this guards: a context that breaks the schema saved; a
 * message whose paths do not say they are under `context`, or that loses
 * what was being done or what happened to the data; the app's zod issues
 * altered on their way to the error (an app reads `issues` with its own
 * zod tooling, paths as its schema names them).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isTabulaError, type TabulaError } from '../../../src/index.js';
import { checkContextSchema } from '../../../src/store/context-schema.js';
import { freshTabula } from './helpers.js';

const schema = z.object({ cart: z.array(z.string()).optional(), total: z.number().optional() });

function caught(run: () => void): TabulaError {
  try {
    run();
  } catch (error) {
    if (isTabulaError(error)) return error;
    throw error;
  }
  throw new Error('expected a TabulaError');
}

describe('checkContextSchema', () => {
  it('passes a matching context, and any context when the session has no schema', () => {
    expect(() => checkContextSchema(schema, { cart: ['a'], total: 1 }, 'save()')).not.toThrow();
    expect(() => checkContextSchema(undefined, { cart: 42 }, 'save()')).not.toThrow();
  });

  it('names every broken field under `context`, what was done and the consequence; the issues are the app’s own', () => {
    const error = caught(() => checkContextSchema(schema, { cart: ['a', 7], total: 'ten' }, 'Run r was rolled back: its context changes', ' Nothing was saved.'));
    expect(error.code).toBe('schema/invalid');
    expect(error.message).toMatch(/^Run r was rolled back: its context changes does not match the session's contextSchema: /);
    expect(error.message).toContain('context.cart[1]: ');
    expect(error.message).toContain('; context.total: ');
    expect(error.message.endsWith('. Nothing was saved.')).toBe(true);
    // The issues are zod's, paths relative to the schema (not prefixed with `context`).
    expect(error.issues?.map((issue) => (issue as { path: unknown[] }).path)).toEqual([['cart', 1], ['total']]);
  });

  it('without a consequence, the message ends with the issues', () => {
    const error = caught(() => checkContextSchema(schema, { total: 'ten' }, 'save() for session "s": state.context'));
    expect(error.message).toMatch(/^save\(\) for session "s": state\.context does not match the session's contextSchema: context\.total: [^;]+\.$/);
  });

  it('save() refuses a context that breaks the schema, stores nothing, and stores one that matches', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s', { contextSchema: schema });
    const error = await session.save({ context: { total: 'ten' } }).catch((e: unknown) => e);
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    expect((error as Error).message).toMatch(/^save\(\) for session "s" of user "anonymous": state\.context does not match the session's contextSchema: context\.total: /);
    expect((await session.state()).version).toBe(0);
    await session.save({ context: { total: 10 } });
    expect((await session.state()).context).toEqual({ total: 10 });
    await tabula.close();
  });
});
