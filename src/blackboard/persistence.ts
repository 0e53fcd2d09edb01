/**
 * Stores a session's Y.Doc in its own IndexedDB database with y-indexeddb,
 * and adds what y-indexeddb lacks:
 * - `flushed()`: y-indexeddb writes each update in its own transaction and
 *   gives no signal; a readwrite transaction on the same store, opened
 *   after them, completes only after they have (IndexedDB runs
 *   overlapping readwrite transactions in order), so awaiting it means
 *   every earlier update is stored;
 * - compaction: y-indexeddb adds a row on every open, even with no change,
 *   so a session opened many times grows; past `compactAboveRows` rows the
 *   log is merged into one row, in one transaction, so no concurrent write
 *   from another tab can be lost.
 */
import { IndexeddbPersistence } from 'y-indexeddb';
import * as Y from 'yjs';
import { TabulaError } from '../core/errors.js';

const UPDATES = 'updates';

export interface DocPersistence {
  readonly provider: IndexeddbPersistence;
  /** Resolves once the stored content is loaded into the doc, or at close() if that comes first. */
  readonly whenLoaded: Promise<void>;
  /** Resolves once every update stored before it is durable; `storage/closed` if closed before it loaded. */
  flushed(): Promise<void>;
  /** Merges the stored log into one row; returns the row counts before and after. */
  compact(): Promise<{ rowsBefore: number; rowsAfter: number }>;
  /** Bytes and rows the stored log holds. */
  size(): Promise<{ bytes: number; rows: number }>;
  close(): Promise<void>;
}

function done(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
    tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'));
  });
}

export interface PersistenceOptions {
  /** Compact on load once the log has more rows than this. @default 20 */
  compactAboveRows?: number;
  onError: (error: TabulaError) => void;
  /** Called when another connection deletes this database (a `versionchange`): the board's life has ended. */
  onDeleted?: () => void;
}

export function persistDoc(name: string, doc: Y.Doc, options: PersistenceOptions): DocPersistence {
  const provider = new IndexeddbPersistence(name, doc);
  const compactAboveRows = options.compactAboveRows ?? 20;
  // y-indexeddb writes each update from inside the doc's update event, so a database closed under it
  // (deleted by another tab) would throw out of blackboard.set() after the value was applied and sent.
  // Its handler runs guarded instead; the failure is reported.
  const storeUpdate = provider._storeUpdate;
  const guardedStore = (update: Uint8Array, origin: unknown) => {
    try {
      storeUpdate(update, origin);
    } catch (error) {
      options.onError(new TabulaError('storage/failed', `Could not store a blackboard change in "${name}".`, { cause: error }));
    }
  };
  doc.off('update', storeUpdate);
  doc.on('update', guardedStore);
  const { onDeleted } = options;
  if (onDeleted) {
    // lib0 closes the connection on versionchange (so a delete is not blocked); the listener is
    // added in the same turn the connection opens, before any versionchange can be dispatched.
    provider._db.then((db) => db.addEventListener('versionchange', () => onDeleted()), () => undefined);
  }

  // y-indexeddb never emits 'synced' once destroyed: a board closed (or its session deleted) while it
  // loads would leave whenLoaded and flushed() pending forever. They wait for whichever comes first.
  let markClosed!: () => void;
  const closed = new Promise<void>((resolve) => (markClosed = resolve));
  /** True once the stored content is loaded; false if close() came first. */
  const synced: Promise<boolean> = Promise.race([provider.whenSynced.then(() => true), closed.then(() => false)]);

  const database = async (): Promise<IDBDatabase> => {
    if (!(await synced)) throw new TabulaError('storage/closed', `The blackboard database "${name}" was closed before it loaded.`);
    if (!provider.db) throw new TabulaError('storage/closed', `The blackboard database "${name}" is closed.`);
    return provider.db;
  };

  const size = async () => {
    const db = await database();
    const tx = db.transaction(UPDATES, 'readonly');
    const request = tx.objectStore(UPDATES).getAll();
    await done(tx);
    const rows = request.result as Uint8Array[];
    return { bytes: rows.reduce((sum, row) => sum + row.byteLength, 0), rows: rows.length };
  };

  const compact = async () => {
    const db = await database();
    const tx = db.transaction(UPDATES, 'readwrite');
    const store = tx.objectStore(UPDATES);
    let rowsBefore = 0;
    // Everything happens in request callbacks of one transaction, so no other tab's write can slip
    // between reading the log and replacing it.
    const keysRequest = store.getAllKeys();
    const rowsRequest = store.getAll();
    rowsRequest.onsuccess = () => {
      const keys = keysRequest.result;
      const rows = rowsRequest.result as Uint8Array[];
      rowsBefore = rows.length;
      if (rowsBefore <= 1) return;
      // One Yjs transaction: rows this doc already has change nothing and emit no update.
      Y.transact(doc, () => rows.forEach((row) => Y.applyUpdate(doc, row)), provider);
      store.add(Y.encodeStateAsUpdate(doc));
      store.delete(IDBKeyRange.bound(keys[0], keys[keys.length - 1]));
    };
    await done(tx);
    return { rowsBefore, rowsAfter: rowsBefore <= 1 ? rowsBefore : 1 };
  };

  /** Rows in the log: a count, not a read of every row (this runs on every open). */
  const rowCount = async () => {
    const tx = (await database()).transaction(UPDATES, 'readonly');
    const request = tx.objectStore(UPDATES).count();
    await done(tx);
    return request.result;
  };

  const whenLoaded = (async () => {
    // Closed before it loaded: nothing to load into a doc no one uses any more.
    if (!(await synced)) return;
    try {
      if ((await rowCount()) > compactAboveRows) await compact();
    } catch (error) {
      // Compaction only saves space; the board is loaded and usable without it.
      options.onError(new TabulaError('storage/failed', `Could not compact the blackboard database "${name}".`, { cause: error }));
    }
  })();

  return {
    provider,
    whenLoaded,
    async flushed() {
      const db = await database();
      // Strict durability: the barrier's commit is flushed to disk, and with it every write before it.
      const tx = db.transaction(UPDATES, 'readwrite', { durability: 'strict' });
      tx.objectStore(UPDATES).count();
      await done(tx);
    },
    compact,
    size,
    async close() {
      markClosed();
      doc.off('update', guardedStore);
      await provider.destroy();
    },
  };
}

export { deleteDocDatabase } from './lives.js';
