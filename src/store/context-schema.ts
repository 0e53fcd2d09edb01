/** Checks a session's `state.context` against its contextSchema, for save() and for runs alike. */
import type { z } from 'zod';
import { TabulaError, describeIssues } from '../core/errors.js';
import type { JsonValue } from '../core/json.js';

/**
 * Throws `schema/invalid` when `context` breaks `schema`, with paths under
 * `context`. The message reads "`what` does not match the session's
 * contextSchema: …." followed by `consequence`.
 */
export function checkContextSchema(schema: z.ZodObject | undefined, context: Record<string, JsonValue>, what: string, consequence = ''): void {
  if (!schema) return;
  // The app's own (classic zod) schema: its messages follow the app's zod configuration, not Tabula's.
  // eslint-disable-next-line no-restricted-syntax
  const result = schema.safeParse(context);
  if (result.success) return;
  const issues = result.error.issues.map((issue) => ({ ...issue, path: ['context', ...issue.path] }));
  throw new TabulaError('schema/invalid', `${what} does not match the session's contextSchema: ${describeIssues(issues)}.${consequence}`, {
    issues: result.error.issues,
  });
}
