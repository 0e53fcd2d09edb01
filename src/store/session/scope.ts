/**
 * What the parts of one session handle share (index.ts builds it; state.ts,
 * journal.ts and copy.ts take it): the session's keys and label, the checks
 * and wrappers every read and write of the handle goes through, and the
 * ranges of the session's rows. It holds no reference to the handle itself,
 * so nothing kept by a part keeps the handle alive (see handles.ts).
 */
import type { z } from 'zod';
import type { StoreContext } from '../context.js';
import type { SessionRow } from '../db/rows.js';
import { sessionRange } from '../db/schema.js';
import type { Emitter, WriteScope } from '../writer.js';

/** One session handle's keys, and the wrappers through which it reads and writes (plain functions: they can be passed on). */
export interface HandleScope {
  readonly store: StoreContext;
  readonly userId: string;
  readonly sessionId: string;
  /** `session "s" of user "u"`, for errors. */
  readonly label: string;
  readonly contextSchema: z.ZodObject | undefined;
  /** The session life the handle is bound to (see `SessionHandleInit.life`). */
  readonly life: string | undefined;
  /** Throws `storage/closed` when the Tabula or the handle is closed. */
  readonly ensureOpen: () => void;
  /** One write transaction on the handle's session life (see writer.ts `commit`); `what` names it in errors. */
  readonly write: <T>(what: string, build: (tx: Emitter) => Promise<T>, scope?: WriteScope) => Promise<T>;
  /** Runs a read, its storage failures mapped to TabulaErrors naming `what`. */
  readonly read: <T>(what: string, fn: () => Promise<T>) => Promise<T>;
  /** The session row, validated; `session/not-found` when the session is gone. */
  readonly readRow: () => Promise<SessionRow>;
}

/** The session's messages, in order. */
export function messageRows({ store: { db }, userId, sessionId }: HandleScope) {
  return db.messages.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId));
}

/** The session's journal entries, in order. */
export function journalRows({ store: { db }, userId, sessionId }: HandleScope) {
  return db.journal.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId));
}

/** The session's notes, in order. */
export function noteRows({ store: { db }, userId, sessionId }: HandleScope) {
  return db.notes.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId));
}
