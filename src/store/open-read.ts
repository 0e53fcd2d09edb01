/**
 * The reads that skip Dexie's transaction machinery, on Dexie's native
 * connection: the one read `tabula.session()` makes, and a session's messages
 * in order (`session.messages()`). They return rows as stored; validating them
 * is the caller's job. Writes never come here: they all go through `commit`
 * (writer.ts). Where the native connection is not open (Dexie closed it for
 * another tab's upgrade or delete, and reopens it on its next use), or the
 * browser lacks what a read needs, Dexie reads.
 *
 * `session()`'s read: the session row and what crash recovery looks for (the
 * session's runs still `running`, its messages still `streaming`), in one
 * readonly transaction, so the three come from one snapshot in one round
 * trip. It resolves as soon as its three requests have succeeded: Dexie's
 * `db.transaction()` resolves only once the transaction has committed, which
 * a readonly transaction has no need to wait for. Measured in Chromium 156 on
 * a 100k-message session: the read alone went from 1.3 to 0.85 ms (medians),
 * the read and the `messages({ last: 50 })` after it from 2.9 to 2.6 ms.
 *
 * A read made while that transaction is still alive (the app asked for the
 * messages in the same turn of the event loop that `session()` resolved in)
 * is made in it rather than in a new one. That is not a read ahead: the read
 * is issued when the app asks, and IndexedDB starts no readwrite transaction
 * over these stores (another tab's, sync's, this tab's) while a readonly one
 * made before it is alive, so the read sees every commit made before it, as a
 * new transaction would. It saves creating and scheduling a transaction
 * (0.09 ms of a 0.8 ms read, medians in Chromium 156).
 */
import { nativeTransaction, succeeded } from './native-requests.js';
import { sessionRange, type TabulaDb } from './db/schema.js';
import type { RunRow, MessageRow } from './db/rows.js';

/** A session's runs still marked running and messages still streaming, as read from IndexedDB. */
export interface Unfinished {
  readonly runs: readonly RunRow[];
  readonly streams: readonly MessageRow[];
}

/** What {@link readSessionOpen} found: the session row as stored (unvalidated), and what may need recovering. */
export interface SessionOpenRead {
  readonly row: unknown;
  readonly unfinished: Unfinished;
  /**
   * The native transaction it read in (null when Dexie read), for {@link readMessageRows} to reuse while
   * it is alive; its scope is the sessions, runs and messages stores.
   */
  readonly tx: IDBTransaction | null;
}

// Dexie names a compound index after its key paths (db/schema.ts). Streams are found through the sparse
// index of schema version 4: only rows still streaming carry the `streaming` marker (1) it reads.
const RUNS_BY_STATUS = '[userId+sessionId+status]';
const STREAMING_MESSAGES = '[userId+sessionId+streaming]';
const MESSAGES_BY_ORDER = '[userId+sessionId+order]';
const OPEN_READ_STORES = ['sessions', 'runs', 'messages'];

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
  const tx = nativeTransaction(db, OPEN_READ_STORES, 'readonly');
  if (!tx) {
    const [row, unfinished] = await db.transaction('r', [db.sessions, db.runs, db.messages], () =>
      Promise.all([db.sessions.get([userId, sessionId]), findUnfinished(db, userId, sessionId)]),
    );
    return { row, unfinished, tx: null };
  }
  const [row, runs, streams] = await Promise.all([
    succeeded<unknown>(tx.objectStore('sessions').get([userId, sessionId])),
    succeeded(tx.objectStore('runs').index(RUNS_BY_STATUS).getAll([userId, sessionId, 'running']) as IDBRequest<RunRow[]>),
    succeeded(tx.objectStore('messages').index(STREAMING_MESSAGES).getAll([userId, sessionId, 1]) as IDBRequest<MessageRow[]>),
  ]);
  return { row, unfinished: { runs, streams }, tx };
}

/** IndexedDB 3's `getAll({ query, count, direction })`, which reads the last n of a range in one request. */
type Idb3Index = IDBIndex & { getAll(options: { query: IDBKeyRange; count?: number; direction: 'prev' }): IDBRequest<unknown[]> };

/**
 * A session's message rows, oldest first: all of them, or the last `last`. `reuse` is a transaction
 * of {@link readSessionOpen}, read in when it is still alive (see the module comment). Rejects with the
 * IndexedDB or Dexie error.
 */
export async function readMessageRows(db: TabulaDb, userId: string, sessionId: string, last?: number, reuse?: IDBTransaction | null): Promise<unknown[]> {
  // getAll's count 0 means no limit.
  if (last === 0) return [];
  const [lower, upper] = sessionRange(userId, sessionId);
  // Without IndexedDB 3's getAll options the last n are a cursor walk, and Dexie's is as good as any.
  if (last === undefined || (typeof IDBIndex === 'function' && 'getAllRecords' in IDBIndex.prototype)) {
    const query = IDBKeyRange.bound(lower, upper);
    const read = (tx: IDBTransaction | null): IDBRequest<unknown[]> | null => {
      if (!tx) return null;
      const index = tx.objectStore('messages').index(MESSAGES_BY_ORDER);
      return last === undefined ? index.getAll(query) : (index as Idb3Index).getAll({ query, count: last, direction: 'prev' });
    };
    // The request is what tells whether `reuse` still takes reads: it throws when the transaction is over.
    const request = (reuse ? unlessOver(() => read(reuse)) : null) ?? unlessOver(() => read(nativeTransaction(db, ['messages'], 'readonly')));
    if (request) {
      const rows = await succeeded(request);
      return last === undefined ? rows : rows.reverse();
    }
  }
  const range = db.messages.where(MESSAGES_BY_ORDER).between(lower, upper);
  return last === undefined ? range.toArray() : (await range.reverse().limit(last).toArray()).reverse();
}

/** `make()`, or null when the transaction it uses has finished or takes no more requests. */
function unlessOver<T>(make: () => T | null): T | null {
  try {
    return make();
  } catch (error) {
    if (error instanceof DOMException && (error.name === 'InvalidStateError' || error.name === 'TransactionInactiveError')) return null;
    throw error;
  }
}
