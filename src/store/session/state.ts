/**
 * A session's state fields (summary, tasks, plan, permissions, tools,
 * context): reading them, and `save()`, which checks a patch and writes the
 * whole state compare-and-set against the version it was built on. On a
 * conflict it refuses, overwrites, or runs the caller's merge function and
 * tries again, as the caller's policy says. Which save wins between replicas
 * is store/apply/'s rule, not this module's.
 */
import { TabulaError, describeIssues, formatPath } from '../../core/errors.js';
import { deepFreeze, findJsonProblem } from '../../core/json.js';
import { describeValue, isPlainObject } from '../../core/args.js';
import { StatePatchSchema } from '../../core/ops.js';
import { safeParse } from '../../core/validation.js';
import { checkContextSchema } from '../context-schema.js';
import type { SessionRow } from '../db/rows.js';
import type { ConflictPolicy, SaveOptions, SessionState, SessionStatePatch } from '../types.js';
import type { HandleScope } from './scope.js';

const STATE_KEYS = ['summary', 'tasks', 'plan', 'permissions', 'tools', 'context'] as const;

/** How often save() runs a merge function before it gives up on a session that keeps changing under it. */
const MAX_MERGE_ATTEMPTS = 8;

/** Validates save() options up front, so a bad policy is refused whether or not a conflict happens. */
function checkSaveOptions(options: unknown): { expectedVersion: number | undefined; onConflict: ConflictPolicy } {
  if (!isPlainObject(options)) throw new TabulaError('argument/invalid', `save(patch, options) takes an options object or nothing, got ${describeValue(options)}.`);
  const { expectedVersion, onConflict = 'reject' } = options as SaveOptions;
  if (expectedVersion !== undefined && (typeof expectedVersion !== 'number' || !Number.isSafeInteger(expectedVersion) || expectedVersion < 0)) {
    throw new TabulaError('argument/invalid', `save({ expectedVersion }) takes the version number read from state(), got ${describeValue(expectedVersion)}.`);
  }
  if (onConflict !== 'reject' && onConflict !== 'overwrite' && typeof onConflict !== 'function') {
    throw new TabulaError('argument/invalid', `save({ onConflict }) must be 'reject', 'overwrite' or a merge function, got ${describeValue(onConflict)}.`);
  }
  return { expectedVersion, onConflict };
}

function saveConflict(label: string, expected: number, actual: number, gaveUp: boolean): TabulaError {
  return new TabulaError(
    'session/conflict',
    gaveUp
      ? `save() for ${label}: the session changed again under each of ${MAX_MERGE_ATTEMPTS} merges (now at version ${actual}). Nothing was written; retry later.`
      : `save() for ${label} expected version ${expected}, but the session is at version ${actual} (saved elsewhere meanwhile). ` +
          'Nothing was written. Read state() again and retry, or pass onConflict: "overwrite" or a merge function.',
  );
}

/** The state of a session row, as `state()` returns it: a frozen copy, with its version. */
export function toState(row: SessionRow): SessionState {
  return deepFreeze({ ...structuredClone(row.state), version: row.version, updatedAt: row.updatedAt });
}

/** Validates a state patch (`where` names the call in errors): plain JSON, known fields, a context the session's schema accepts. */
function checkPatch({ label, contextSchema }: HandleScope, patch: unknown, where: string): SessionStatePatch {
  if (!isPlainObject(patch)) {
    throw new TabulaError('argument/invalid', `${where} takes a plain object of state fields (${STATE_KEYS.join(', ')}), got ${describeValue(patch)}.`);
  }
  for (const [key, value] of Object.entries(patch)) {
    const problem = findJsonProblem(value);
    if (problem) {
      throw new TabulaError('schema/invalid', `${where}: field ${formatPath([key, ...problem.path])} is not JSON: ${problem.message}.`, { issues: [problem] });
    }
  }
  const result = safeParse(StatePatchSchema, patch);
  if (!result.success) {
    throw new TabulaError(
      'schema/invalid',
      `${where} for ${label}: ${describeIssues(result.error.issues)}. Writable fields: ${STATE_KEYS.join(', ')}.`,
      { issues: result.error.issues },
    );
  }
  if (result.data.context) checkContextSchema(contextSchema, result.data.context, `save() for ${label}: state.context`);
  return result.data;
}

/** `session.save(patch, options)`: see `Session.save` and `SaveOptions`. */
export async function saveState(scope: HandleScope, patch: unknown, options: unknown = {}): Promise<SessionState> {
  const { label, write } = scope;
  const original = checkPatch(scope, patch, 'save()');
  const { expectedVersion, onConflict } = checkSaveOptions(options);
  let checked = original;
  let expected = expectedVersion;
  // A merge function runs between transactions (it may be async, and IndexedDB commits a transaction
  // that waits on anything else), so its result is saved compare-and-set against the version it saw.
  for (let attempt = 1; ; attempt++) {
    const outcome = await write<{ saved: SessionState } | { conflict: SessionState }>('save state', async (tx) => {
      const row = tx.existing();
      if (expected !== undefined && row.version !== expected && onConflict !== 'overwrite') {
        if (onConflict === 'reject' || attempt > MAX_MERGE_ATTEMPTS) throw saveConflict(label, expected, row.version, attempt > MAX_MERGE_ATTEMPTS);
        return { conflict: toState(row) };
      }
      // The whole state travels with the save: a save that wins on another replica must not depend on
      // which earlier saves that replica has seen (architecture.md, Convergence).
      // `base` names the save this one is built on, so a replica where another save stands can tell it was replaced.
      await tx.emit('state.save', { version: row.version + 1, patch: { ...row.state, ...checked }, base: row.versionOrder ?? '' });
      return { saved: toState(tx.existing()) };
    });
    if ('saved' in outcome) return outcome.saved;
    if (typeof onConflict !== 'function') throw new TabulaError('argument/invalid', 'unreachable: a conflict without a merge function');
    const merged: unknown = await onConflict(outcome.conflict, original);
    checked = checkPatch(scope, merged, 'the onConflict merge function result');
    expected = outcome.conflict.version;
  }
}
