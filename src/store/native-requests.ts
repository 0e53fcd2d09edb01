/**
 * IndexedDB transactions on Dexie's own connection, without Dexie's
 * transaction machinery: the readonly ones of open-read.ts, and the readwrite
 * one of an append built on a known session row (`commit` in writer.ts), whose
 * requests {@link nativeRequests} issues for the one write path (requests.ts).
 * Measured in Chromium (bench/append-floor.bench.ts): the three requests of an
 * append cost 0.95× raw Dexie's single add on a native transaction, 1.35× in a
 * Dexie transaction.
 *
 * What the native side must do that Dexie did:
 * - A write is durable when its promise resolves: {@link transactionDone}
 *   waits for the `complete` event, as Dexie's `db.transaction()` does, with
 *   the same durability (Dexie passes none unless `chromeTransactionDurability`
 *   is set, and createDb sets none).
 * - A refused add (ConstraintError) must not fail the transaction: its error
 *   event's default (aborting) is prevented, as Dexie's bulkAdd does.
 * - Requests may be issued only while the transaction is active: from a
 *   request's callback or the promise continuations that run right after it
 *   (the microtask checkpoint), never after awaiting anything else. The
 *   append path awaits nothing but these requests.
 */
import { Dexie } from 'dexie';
import { NONE_REFUSED, type RequestTable, type WriteRequests } from './requests.js';
import type { TabulaDb } from './db/schema.js';

const failure = (request: IDBRequest) => request.error ?? new DOMException('The IndexedDB request failed.', 'UnknownError');

/** The request's result, once it has succeeded; its error when it fails. */
export function succeeded<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(failure(request));
  });
}

/**
 * A transaction over `stores` on the open native connection; null when there is none to use (Dexie
 * closed it for another tab's upgrade or delete, and reopens it on its next use), or when the caller
 * runs inside a Dexie transaction: a write of its own would wait for that one to end, which waits for it.
 */
export function nativeTransaction(db: TabulaDb, stores: string[], mode: IDBTransactionMode): IDBTransaction | null {
  if (!db.isOpen() || Dexie.currentTransaction) return null;
  try {
    return db.backendDB().transaction(stores, mode);
  } catch (error) {
    // The connection is closing (a versionchange arrived and Dexie has not seen it yet): let Dexie reopen it.
    if (error instanceof DOMException && error.name === 'InvalidStateError') return null;
    throw error;
  }
}

/** Resolves when the transaction has committed (durable); rejects with its error when it aborts. */
export function transactionDone(tx: IDBTransaction): Promise<void> {
  const done = new Promise<void>((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new DOMException('The IndexedDB transaction was aborted.', 'AbortError'));
  });
  // The caller may learn of a failure from a request first and never ask this promise.
  done.catch(() => undefined);
  return done;
}

/** Aborts the transaction unless it has already committed or aborted (then there is nothing left to stop). */
export function abortTransaction(tx: IDBTransaction): void {
  try {
    tx.abort();
  } catch (error) {
    if (!(error instanceof DOMException && error.name === 'InvalidStateError')) throw error;
  }
}

/**
 * Issues one request per item and resolves, with the requests, once the last has succeeded: a
 * transaction runs its requests in order, so by then every one has. `refused`, when given, collects
 * the positions whose add found its key taken, and keeps the transaction going past them.
 */
function issueAll<T>(items: readonly T[], issue: (item: T) => IDBRequest, refused?: Set<number>): Promise<IDBRequest[]> {
  return new Promise((resolve, reject) => {
    // A row IndexedDB cannot take (no key, not cloneable) throws here, which rejects; the writer aborts what was issued.
    const requests = items.map(issue);
    const last = requests.length - 1;
    requests.forEach((request, position) => {
      request.onerror = (event) => {
        if (refused && request.error?.name === 'ConstraintError') {
          event.preventDefault();
          event.stopPropagation();
          refused.add(position);
          if (position === last) resolve(requests);
          return;
        }
        reject(failure(request));
      };
    });
    const final = requests[last];
    if (final) final.onsuccess = () => resolve(requests);
    else resolve(requests);
  });
}

function nativeTable<Row, Key>(tx: IDBTransaction, name: string): RequestTable<Row, Key> {
  let store: IDBObjectStore | undefined;
  const open = () => (store ??= tx.objectStore(name));
  return {
    get: (key) => succeeded(open().get(key as IDBValidKey) as IDBRequest<Row | undefined>),
    bulkGet: (keys) => issueAll(keys, (key) => open().get(key as IDBValidKey)).then((requests) => requests.map((request) => request.result as Row | undefined)),
    bulkAdd: (rows) => {
      const refused = new Set<number>();
      return issueAll(rows, (row) => open().add(row), refused).then(() => (refused.size === 0 ? NONE_REFUSED : refused));
    },
    put: (row) => succeeded(open().put(row)),
  };
}

/** The requests of a native readwrite transaction over the stores of an append (sessions, messages, meta, outbox). */
export function nativeRequests(tx: IDBTransaction): WriteRequests {
  return {
    sessions: nativeTable(tx, 'sessions'),
    messages: nativeTable(tx, 'messages'),
    meta: nativeTable(tx, 'meta'),
    outbox: nativeTable(tx, 'outbox'),
    resolved: (value) => Promise.resolve(value),
  };
}
