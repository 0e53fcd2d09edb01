/**
 * Validation against Tabula's schemas, with messages a person can read.
 *
 * Every schema in Tabula is a `zod/mini` schema: the functional, tree-shakable
 * build of zod, so a page pays only for the checks Tabula uses (classic zod's
 * chainable methods keep every check in the bundle). zod/mini loads no
 * message locale, so its issues would all read "Invalid input". Rather than
 * `z.config()` the English locale (that would run at import time and change
 * the messages of the app's own zod schemas), each parse here passes the
 * English messages for itself; a message a schema or check sets itself still
 * wins over them. Every parse in `src` goes through {@link safeParse} (ESLint
 * refuses a `.safeParse()` or `.parse()` call elsewhere).
 *
 * It does not turn issues into errors: each caller does, naming its record.
 */
import * as z from 'zod/mini';
import { en } from 'zod/locales';

const englishMessages: z.core.ParseContext<z.core.$ZodIssue> = { error: /* @__PURE__ */ en().localeError };

/**
 * Validates `value` against `schema`; on failure, `error.issues` holds zod's
 * issues with English messages (`expected string, received number`).
 */
export function safeParse<T extends z.core.$ZodType>(schema: T, value: unknown): z.core.util.SafeParseResult<z.output<T>> {
  // eslint-disable-next-line no-restricted-syntax -- the one parse that supplies the messages
  return z.safeParse(schema, value, englishMessages);
}
