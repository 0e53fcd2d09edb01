/**
 * Storage failures mapped to TabulaError at the store's edge
 * (src/store/errors.ts); the common cases are in corrupt-and-errors.test.ts.
 * The class of bug this guards: a quota or closed-database failure that
 * Dexie or the browser wrapped (in `cause`, `inner`, a bulk `failures`
 * list, several levels deep) reported as a generic failure, which hides the
 * one thing the app can do about it; a wrapper cycle hanging the mapping;
 * a failure that is not an Error losing its text.
 */
import { describe, expect, it } from 'vitest';
import { TabulaError } from '../../../src/index.js';
import { mapStorageError } from '../../../src/store/errors.js';

/** `error` wrapped `levels` times, each wrapper holding the one inside under `key`. */
function wrapped(error: unknown, levels: number, key: 'inner' | 'cause'): unknown {
  let outer = error;
  for (let level = 0; level < levels; level++) outer = { name: 'AbortError', message: `level ${level}`, [key]: outer };
  return outer;
}

describe('mapStorageError', () => {
  it('passes a TabulaError through unchanged', () => {
    const original = new TabulaError('session/not-found', 'No session "s".');
    expect(mapStorageError(original, 'read')).toBe(original);
  });

  it('finds a quota failure in cause as well as inner, down to 8 wrappers deep', () => {
    const quota = new DOMException('full', 'QuotaExceededError');
    for (const key of ['inner', 'cause'] as const) {
      expect(mapStorageError(wrapped(quota, 1, key), 'save').code).toBe('storage/quota-exceeded');
      expect(mapStorageError(wrapped(quota, 8, key), 'save').code).toBe('storage/quota-exceeded');
      // Deeper than that is not searched (the depth bounds a wrapper chain that loops).
      expect(mapStorageError(wrapped(quota, 9, key), 'save').code).toBe('storage/failed');
    }
    const bulk = { name: 'BulkError', failures: [{ name: 'ConstraintError' }, { name: 'AbortError', inner: quota }] };
    expect(mapStorageError(wrapped(bulk, 2, 'cause'), 'import').code).toBe('storage/quota-exceeded');
  });

  it('finds a closed database however it is wrapped, and says to open again', () => {
    const closed = { name: 'DatabaseClosedError', message: 'Database has been closed' };
    const mapped = mapStorageError({ name: 'BulkError', failures: [wrapped(closed, 2, 'cause')] }, 'append to session "s"');
    expect(mapped.code).toBe('storage/closed');
    expect(mapped.message).toBe('Could not append to session "s": the database is closed. Open Tabula again with openTabula().');
    expect(mapped.cause).toEqual({ name: 'BulkError', failures: [wrapped(closed, 2, 'cause')] });
  });

  it('a quota failure says nothing was saved and what to do', () => {
    const mapped = mapStorageError(new DOMException('full', 'QuotaExceededError'), 'save session "s"');
    expect(mapped.message).toBe(
      `Could not save session "s": the browser's storage quota for this site is used up. Nothing of this write was saved and earlier data is intact. ` +
        'Free space (delete old sessions, tabula.storage() shows usage) or ask for persistent storage with tabula.requestPersistence().',
    );
  });

  it('a wrapper chain that loops ends as storage/failed, not a hang or a stack overflow', () => {
    const loop: { name: string; message: string; inner?: unknown; cause?: unknown; failures?: unknown[] } = { name: 'AbortError', message: 'loops' };
    loop.inner = loop;
    loop.cause = { name: 'Error', cause: loop };
    loop.failures = [loop];
    const mapped = mapStorageError(loop, 'read');
    expect(mapped.code).toBe('storage/failed');
    expect(mapped.message).toBe('Could not read: loops');
  });

  it('keeps the text of a failure that is not an Error: a string, null, an object without a string message', () => {
    expect(mapStorageError('disk gone', 'read')).toMatchObject({ code: 'storage/failed', message: 'Could not read: disk gone', cause: 'disk gone' });
    expect(mapStorageError(null, 'read').message).toBe('Could not read: null');
    expect(mapStorageError(undefined, 'read').message).toBe('Could not read: undefined');
    expect(mapStorageError({ message: 42 }, 'read').message).toBe('Could not read: [object Object]');
    // A name that is not a known condition, on a non-object inner, maps to storage/failed.
    expect(mapStorageError({ name: 'QuotaExceeded', inner: 'QuotaExceededError' }, 'read').code).toBe('storage/failed');
  });
});
