/**
 * The session rows this Tabula last saw committed (by its own writes or by
 * `session()`), so that an append can build its writes on a known row and
 * issue them together with the read that checks it, instead of reading the
 * row first (see `commit` in writer.ts). A known row is a guess, never a
 * source of truth: every use is checked against the row IndexedDB holds,
 * inside the same transaction, and a wrong guess costs a retry, nothing else.
 * A known row is valid: it passed `checkRow`, or apply built it from one that
 * did; the check compares the stored row with it field by field and does not
 * validate the stored row again (see `knownSlot` in store/apply/slot.ts), so a row that
 * was never validated must not be recorded here.
 * Bounded: the least recently used rows are forgotten first.
 */
import type { SessionRow } from './db/rows.js';

/** How many sessions' rows one Tabula keeps; an app rarely writes to more at once. */
const KNOWN_ROWS_MAX = 64;

/** The session rows one Tabula knows, by (userId, sessionId). */
export interface KnownRows {
  get(userId: string, sessionId: string): SessionRow | undefined;
  /** Records the row as committed; undefined forgets it (the session is gone or its state unknown). */
  set(userId: string, sessionId: string, row: SessionRow | undefined): void;
  clear(): void;
}

/** An empty set of known rows, holding at most the 64 most recently used. */
export function createKnownRows(): KnownRows {
  const rows = new Map<string, SessionRow>();
  const keyOf = (userId: string, sessionId: string) => JSON.stringify([userId, sessionId]);
  return {
    get(userId, sessionId) {
      const key = keyOf(userId, sessionId);
      const row = rows.get(key);
      if (row) {
        rows.delete(key);
        rows.set(key, row);
      }
      return row;
    },
    set(userId, sessionId, row) {
      const key = keyOf(userId, sessionId);
      rows.delete(key);
      if (!row) return;
      rows.set(key, row);
      if (rows.size > KNOWN_ROWS_MAX) rows.delete(rows.keys().next().value as string);
    },
    clear() {
      rows.clear();
    },
  };
}
