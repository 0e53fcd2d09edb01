/**
 * Maps IndexedDB and Dexie failures to TabulaError at the store's edge, so
 * callers see one code per condition whatever the browser or Dexie wrapped
 * the failure in.
 */
import { TabulaError, isTabulaError } from '../core/errors.js';

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  inner?: unknown;
  cause?: unknown;
  failures?: unknown;
}

/** True when the error, or any error it wraps (Dexie's `inner`, `cause`, bulk `failures`), has `name`. */
function wraps(error: unknown, name: string, depth = 0): boolean {
  if (depth > 8 || typeof error !== 'object' || error === null) return false;
  const e = error as ErrorLike;
  if (e.name === name) return true;
  if (wraps(e.inner, name, depth + 1) || wraps(e.cause, name, depth + 1)) return true;
  if (Array.isArray(e.failures)) return e.failures.some((f) => wraps(f, name, depth + 1));
  return false;
}

/**
 * A TabulaError for a failed storage operation. `what` says what was being
 * done ("append to session s1"). TabulaErrors pass through unchanged.
 */
export function mapStorageError(error: unknown, what: string): TabulaError {
  if (isTabulaError(error)) return error;
  if (wraps(error, 'QuotaExceededError')) {
    return new TabulaError(
      'storage/quota-exceeded',
      `Could not ${what}: the browser's storage quota for this site is used up. Nothing of this write was saved and earlier data is intact. ` +
        'Free space (delete old sessions, tabula.storage() shows usage) or ask for persistent storage with tabula.requestPersistence().',
      { cause: error },
    );
  }
  if (wraps(error, 'DatabaseClosedError')) {
    return new TabulaError('storage/closed', `Could not ${what}: the database is closed. Open Tabula again with openTabula().`, {
      cause: error,
    });
  }
  const message = typeof (error as ErrorLike | null)?.message === 'string' ? (error as { message: string }).message : String(error);
  return new TabulaError('storage/failed', `Could not ${what}: ${message}`, { cause: error });
}
