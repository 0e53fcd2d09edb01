/**
 * Names: the ids and labels that key stored rows (user ids, session ids,
 * memory scopes and keys). One set of limits for every way a name gets in
 * (the API, an import, sync), so that whatever is stored can be opened,
 * listed and deleted again through the API.
 *
 * It does not check ids that Tabula generates itself.
 */
import * as z from 'zod/mini';
import { TabulaError } from './errors.js';

/** The longest user id or session id, in UTF-16 code units. */
export const ID_MAX_LENGTH = 256;

/** The longest memory scope, memory key or runId, in UTF-16 code units. */
export const KEY_MAX_LENGTH = 128;

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `value` cannot be a name of at most `max` code units, or null when it
 * can: a string of 1–`max` code units that is well-formed Unicode (a lone
 * surrogate cannot be encoded as UTF-8, so lock names, URLs and the sync
 * wire would throw on it later) without NUL.
 */
export function findNameProblem(value: unknown, max: number): string | null {
  if (typeof value !== 'string') return `expected a string, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`;
  if (value.length < 1 || value.length > max) return `expected 1–${max} characters, got ${value.length}`;
  if (LONE_SURROGATE.test(value)) return 'contains a lone UTF-16 surrogate, which is not valid Unicode text';
  // PostgreSQL text cannot hold NUL, so the sync server could not store a row keyed by it.
  if (value.includes('\u0000')) return 'contains U+0000 (NUL), which a sync server on PostgreSQL cannot store';
  return null;
}

/** Returns `value` as a name, or throws `argument/invalid` saying `what` was wrong. */
export function checkName(value: unknown, what: string, max = ID_MAX_LENGTH): string {
  const problem = findNameProblem(value, max);
  if (problem) throw new TabulaError('argument/invalid', `${what} must be a string of 1–${max} characters of valid Unicode: ${problem}.`);
  return value as string;
}

/** The zod schema of a name of at most `max` code units (for imports and wire data). */
export function nameSchema(max = ID_MAX_LENGTH): z.ZodMiniType<string> {
  return z.string().check(
    z.superRefine((value, ctx) => {
      const problem = findNameProblem(value, max);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  );
}
