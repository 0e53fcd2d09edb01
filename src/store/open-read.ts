/**
 * The one read `tabula.session()` makes: the session row and what crash
 * recovery looks for (the session's runs still `running`, its messages still
 * `streaming`), in one readonly IndexedDB transaction, so the three come from
 * one snapshot in one round trip. It returns the rows as stored; validating
 * the session row and acting on the unfinished ones is the caller's job.
 *
 * The transaction is made on Dexie's native connection and the read resolves
 * as soon as its three requests have succeeded. Dexie's `db.transaction()`
 * resolves only once the transaction has committed, which a readonly
 * transaction has no need to wait for. Measured in Chromium 156 on a
 * 100k-message session: the read alone went from 1.3 to 0.85 ms (medians),
 * the read and the `messages({ last: 50 })` after it from 2.9 to 2.6 ms (the
 * next read then waits a little for the commit in the browser). Where the
 * native connection is not open (Dexie closed it for another tab's upgrade
 * or delete, and reopens it on its next use), Dexie reads.
 */
import type { RunRow, MessageRow, TabulaDb } from './schema.js';

/** A session's runs still marked running and messages still streaming, as read from IndexedDB. */
export interface Unfinished {
  readonly runs: readonly RunRow[];
  readonly streams: readonly MessageRow[];
}

/** What {@link readSessionOpen} found: the session row as stored (unvalidated), and what may need recovering. */
export interface SessionOpenRead {
  readonly row: unknown;
  readonly unfinished: Unfinished;
}

// Dexie names a compound index after its key paths (schema.ts). Streams are found through the sparse
// index of schema version 3: only rows still streaming carry the `streaming` marker (1) it reads.
const RUNS_BY_STATUS = '[userId+sessionId+status]';
const STREAMING_MESSAGES = '[userId+sessionId+streaming]';

const succeeded = <T>(request: IDBRequest<T>): Promise<T> =>
  new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new DOMException('The IndexedDB request failed.', 'UnknownError'));
  });

/** The runs and streams of a session that may need recovering, read through Dexie (inside its transaction, if any). */
export async function findUnfinished(db: TabulaDb, userId: string, sessionId: string): Promise<Unfinished> {
  const [runs, streams] = await Promise.all([
    db.runs.where(RUNS_BY_STATUS).equals([userId, sessionId, 'running']).toArray(),
    db.messages.where(STREAMING_MESSAGES).equals([userId, sessionId, 1]).toArray(),
  ]);
  return { runs, streams };
}

/** Reads a session's row and its unfinished runs and streams in one readonly transaction. Rejects with the IndexedDB or Dexie error. */
export async function readSessionOpen(db: TabulaDb, userId: string, sessionId: string): Promise<SessionOpenRead> {
  const tx = nativeTransaction(db);
  if (!tx) {
    const [row, unfinished] = await db.transaction('r', [db.sessions, db.runs, db.messages], () =>
      Promise.all([db.sessions.get([userId, sessionId]), findUnfinished(db, userId, sessionId)]),
    );
    return { row, unfinished };
  }
  const [row, runs, streams] = await Promise.all([
    succeeded<unknown>(tx.objectStore('sessions').get([userId, sessionId])),
    succeeded(tx.objectStore('runs').index(RUNS_BY_STATUS).getAll([userId, sessionId, 'running']) as IDBRequest<RunRow[]>),
    succeeded(tx.objectStore('messages').index(STREAMING_MESSAGES).getAll([userId, sessionId, 1]) as IDBRequest<MessageRow[]>),
  ]);
  return { row, unfinished: { runs, streams } };
}

/** A readonly transaction over the three stores on the open native connection; null when there is none to use. */
function nativeTransaction(db: TabulaDb): IDBTransaction | null {
  if (!db.isOpen()) return null;
  try {
    return db.backendDB().transaction(['sessions', 'runs', 'messages'], 'readonly');
  } catch (error) {
    // The connection is closing (a versionchange arrived and Dexie has not seen it yet): let Dexie reopen it.
    if (error instanceof DOMException && error.name === 'InvalidStateError') return null;
    throw error;
  }
}
