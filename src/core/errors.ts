/**
 * The one error type Tabula throws. Callers match on `code`, never on
 * `instanceof`: an error that crossed a worker or a tab is a plain object
 * again, and its code is the only thing that survives for certain.
 *
 * This module owns the codes and the helpers to build and recognise errors.
 * It does not map storage or network failures: adapters do that at their
 * edge, because only they know the foreign error types.
 */

/** Every condition Tabula reports, one code per condition. */
export type ErrorCode =
  | 'schema/invalid'
  | 'argument/invalid'
  | 'scope/positional'
  | 'context/over-limit'
  | 'session/conflict'
  | 'session/not-found'
  | 'session/exists'
  | 'checkpoint/not-found'
  | 'checkpoint/incomplete'
  | 'run/busy'
  | 'run/nested'
  | 'run/interrupted'
  | 'run/stale'
  | 'stream/closed'
  | 'stream/dropped'
  | 'tokens/aborted'
  | 'note/too-long'
  | 'memory/bad-key'
  | 'memory/bad-value'
  | 'storage/quota-exceeded'
  | 'storage/closed'
  | 'storage/failed'
  | 'blackboard/loading'
  | 'sync/unauthorized'
  | 'sync/forbidden'
  | 'sync/gap'
  | 'sync/too-large'
  | 'sync/not-found'
  | 'sync/rate-limited'
  | 'sync/timeout'
  | 'sync/offline'
  | 'sync/failed'
  | 'server/driver-missing';

/** One problem found while validating, in a form that survives `structuredClone`. */
export interface ValidationIssue {
  /** Where in the value the problem is, from the root: `['tool_calls', 0, 'id']`. */
  readonly path: readonly PropertyKey[];
  /** What is wrong there, in words. */
  readonly message: string;
  /** The validator's own code for the problem (zod's `code`, or `'custom'`). */
  readonly code?: string;
}

/** What a {@link TabulaError} carries besides its code and message. */
export interface TabulaErrorOptions {
  /** The lower-level error this one explains. */
  cause?: unknown;
  /** Validation issues, passed through untouched (zod's issues for schema failures). */
  issues?: readonly unknown[];
}

/**
 * An error with a stable string `code` and a message that says what was
 * wrong and what to do about it.
 */
export class TabulaError extends Error {
  /** Always `'TabulaError'`: with `code`, what {@link isTabulaError} recognises after a clone. */
  override readonly name = 'TabulaError';
  /** The condition, one code per condition: match on this, never on the message. */
  readonly code: ErrorCode;
  /** The lower-level error this one explains (a DOMException, a zod error, a fetch failure), if any. */
  override readonly cause?: unknown;
  /** The validation issues behind a `schema/invalid` or `argument/invalid` error, untouched. */
  readonly issues?: unknown[];

  constructor(code: ErrorCode, message: string, options: TabulaErrorOptions = {}) {
    super(message);
    this.code = code;
    this.cause = options.cause;
    if (options.issues !== undefined) this.issues = [...options.issues];
  }
}

/**
 * True when `error` is a Tabula error, optionally with the given code. Works
 * on errors that were cloned across a worker or a tab, where `instanceof`
 * fails.
 */
export function isTabulaError(error: unknown, code?: ErrorCode): error is TabulaError {
  if (typeof error !== 'object' || error === null) return false;
  const candidate = error as { name?: unknown; code?: unknown };
  if (candidate.name !== 'TabulaError' || typeof candidate.code !== 'string') return false;
  return code === undefined || candidate.code === code;
}

/**
 * Ends an exhaustive `switch`: the compiler proves it unreachable, and if a
 * value from outside the type system arrives anyway, the error names it.
 */
export function assertNever(value: never, what: string): never {
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? typeof value;
  } catch {
    shown = typeof value;
  }
  throw new TabulaError('argument/invalid', `Unknown ${what}: ${shown}.`);
}

/** `a.b[0].c` from a path, for messages a person reads. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(root)' : out;
}

/** One line per issue: `tool_calls[0].id: expected string`. */
export function describeIssues(issues: readonly ValidationIssue[]): string {
  return issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`).join('; ');
}
