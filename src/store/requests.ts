/**
 * The requests an append makes, behind one small interface, so that one
 * write path (`applyAppends`, `flushSlot`, `queueOutbox`, the known-row
 * check) can issue them through either of two implementations: Dexie's
 * tables, inside a Dexie transaction (every write but one: sync, imports,
 * the first append to a session this Tabula does not know), and a native
 * IndexedDB transaction on Dexie's connection (an append built on a known
 * session row: see `commit` in writer.ts and native-requests.ts). This module
 * holds the contract and Dexie's side; it knows nothing of what the rows mean.
 */
import { Dexie, type Table } from 'dexie';
import type { TabulaDb } from './db/schema.js';
import type { MessageRow, MetaRow, OutboxRow, SessionRow } from './db/rows.js';

/** One object store of a readwrite transaction, as the append path uses it. */
export interface RequestTable<Row, Key> {
  get(key: Key): Promise<Row | undefined>;
  /** The rows of `keys`, in the same order (undefined where none is stored). */
  bulkGet(keys: Key[]): Promise<(Row | undefined)[]>;
  /**
   * Adds `rows`; resolves with the positions refused because their key is already stored (ConstraintError,
   * a replay): the others land and the transaction goes on. Any other failure rejects and fails the transaction.
   */
  bulkAdd(rows: readonly Row[]): Promise<ReadonlySet<number>>;
  put(row: Row): Promise<unknown>;
}

/** The stores an append writes, in the transaction of the write that issues them. */
export interface WriteRequests {
  readonly sessions: RequestTable<SessionRow, [string, string]>;
  readonly messages: RequestTable<MessageRow, [string, string, string]>;
  readonly meta: RequestTable<MetaRow, string>;
  readonly outbox: RequestTable<OutboxRow, [string, number]>;
  /**
   * `value`, as a promise the transaction survives being awaited across: Dexie's (a native promise that
   * touched no table would lose Dexie's transaction zone), or a native one.
   */
  resolved<T>(value: T): Promise<T>;
}

/** No position refused. */
export const NONE_REFUSED: ReadonlySet<number> = new Set();

/** `Insert` is what the table takes (an EntityTable's key is optional there): every stored row is one. */
function dexieTable<Row extends Insert, Key, Insert>(table: Table<Row, Key, Insert>): RequestTable<Row, Key> {
  return {
    get: (key) => table.get(key),
    bulkGet: (keys) => table.bulkGet(keys),
    bulkAdd: (rows) =>
      // Dexie keeps the transaction alive when the BulkError is caught (it prevents each failed add's default).
      table.bulkAdd(rows).then(
        () => NONE_REFUSED,
        (error: unknown) => {
          if (!(error instanceof Dexie.BulkError)) throw error;
          const refused = new Set<number>();
          for (const [position, failure] of Object.entries(error.failuresByPos)) {
            if (failure.name !== 'ConstraintError') throw error;
            refused.add(Number(position));
          }
          return refused;
        },
      ),
    put: (row) => table.put(row),
  };
}

/** The requests of `db`'s tables, made in the Dexie transaction of the caller's zone. */
export function dexieRequests(db: TabulaDb): WriteRequests {
  return {
    sessions: dexieTable(db.sessions),
    messages: dexieTable(db.messages),
    meta: dexieTable(db.meta),
    outbox: dexieTable(db.outbox),
    resolved: (value) => Dexie.Promise.resolve(value),
  };
}
