/**
 * The known session rows (src/store/known-rows.ts) are a bounded cache keyed
 * by (userId, sessionId). The class of bug this guards: two sessions sharing
 * a slot (a key that runs the two ids together), a row kept after it was
 * forgotten, or the bound evicting the row in use instead of the least
 * recently used one; each costs a wrong guess on every append (a retry
 * through Dexie), which no result shows, or unbounded memory.
 */
import { describe, expect, it } from 'vitest';
import { createKnownRows } from '../../../src/store/known-rows.js';
import type { SessionRow } from '../../../src/store/db/rows.js';

/** A stand-in row: the cache stores rows by reference and never reads their fields. */
const rowOf = (sessionId: string) => ({ sessionId }) as unknown as SessionRow;

describe('known rows', () => {
  it('keeps a row per (userId, sessionId), also when the ids could be run together', () => {
    const known = createKnownRows();
    const ab = rowOf('a/b');
    const a_b = rowOf('b');
    known.set('u', 'a/b', ab);
    known.set('u/a', 'b', a_b);
    known.set('u,a', 'b', rowOf('comma'));
    expect(known.get('u', 'a/b')).toBe(ab);
    expect(known.get('u/a', 'b')).toBe(a_b);
    expect(known.get('u', 'b')).toBeUndefined();
    expect(known.get('other', 'a/b')).toBeUndefined();
  });

  it('set(undefined) forgets the row; a later set records the new one; clear() forgets all', () => {
    const known = createKnownRows();
    const first = rowOf('s');
    const second = rowOf('s');
    known.set('u', 's', first);
    known.set('u', 't', rowOf('t'));
    known.set('u', 's', undefined);
    expect(known.get('u', 's')).toBeUndefined();
    expect(known.get('u', 't')).toBeDefined();
    known.set('u', 's', second);
    expect(known.get('u', 's')).toBe(second);
    known.clear();
    expect(known.get('u', 's')).toBeUndefined();
    expect(known.get('u', 't')).toBeUndefined();
  });

  it('holds 64 rows; the 65th forgets the least recently used, and a get or set counts as a use', () => {
    const known = createKnownRows();
    const ids = Array.from({ length: 64 }, (_, k) => `s${k}`);
    for (const id of ids) known.set('u', id, rowOf(id));
    // All 64 fit.
    for (const id of ids) expect(known.get('u', id)).toBeDefined();
    // After the gets above, s0 is the least recently used; reading it makes s1 the oldest.
    expect(known.get('u', 's0')).toBeDefined();
    // Writing s2 again makes it recent too; s1 stays the oldest.
    known.set('u', 's2', rowOf('s2'));
    known.set('u', 's64', rowOf('s64'));
    expect(known.get('u', 's1')).toBeUndefined();
    for (const id of ['s0', 's2', 's3', 's63', 's64']) expect(known.get('u', id)).toBeDefined();
    // The next one forgets s4: s3 was just read, s2 and s0 before it.
    known.set('u', 's65', rowOf('s65'));
    expect(known.get('u', 's4')).toBeUndefined();
    expect(known.get('u', 's5')).toBeDefined();
  });

  it('a miss does not count as a use, and forgetting a row frees its place', () => {
    const known = createKnownRows();
    for (let k = 0; k < 64; k++) known.set('u', `s${k}`, rowOf(`s${k}`));
    expect(known.get('u', 'absent')).toBeUndefined();
    known.set('u', 's10', undefined);
    // 63 rows now: one more fits without evicting s0, the oldest.
    known.set('u', 'new', rowOf('new'));
    expect(known.get('u', 's0')).toBeDefined();
    expect(known.get('u', 's10')).toBeUndefined();
    expect(known.get('u', 'new')).toBeDefined();
  });
});
