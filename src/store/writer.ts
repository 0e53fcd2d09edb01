/**
 * The `commit` function of one open Tabula (whose shared state is
 * context.ts): every local write runs one readwrite transaction that builds ops, applies them
 * through `applyOp`, and, once IndexedDB has committed, announces the
 * change. A write either lands whole or not at all.
 *
 * A write that is queued for sync makes only ops the sync server takes: each
 * at most `MAX_OP_BYTES` of JSON (replication/outbox.ts) (a larger one fails the write with
 * `sync/too-large`, naming the field; the update that ends a stream is
 * written anyway and parked by sync), and each ordered by the store's
 * corrected clock, which never jumps to a key far ahead (see hlc.ts). A
 * session's later write is ordered after its earlier ones when the clock
 * allows; one whose last op is ordered far ahead (data from a clock that
 * ran ahead) gets writes ordered by the clock, before that op.
 */
import { TabulaError } from '../core/errors.js';
import { hlcOf, keyAfter } from '../core/hlc.js';
import type { Op, OpBody, OpKind } from '../core/ops.js';
import { applyAppends, applyOp, flushSlot, isSynced, knownRowsHeld, knownSlot, loadSlot, StaleKnownRow, tombstoneOf, type AppendOp, type SessionSlot } from './apply/index.js';
import { assertOpen, type StoreContext } from './context.js';
import { mapStorageError } from './errors.js';
import { newId } from './ids.js';
import { checkOpSize, queueOutbox } from './replication/outbox.js';
import { syncNames } from './replication/keys.js';
import { afterCommit } from './after-commit.js';
import { abortTransaction, nativeRequests, nativeTransaction, transactionDone } from './native-requests.js';
import { dexieRequests, type WriteRequests } from './requests.js';
import { sessionTables } from './db/schema.js';
import { lifeOf, type OutboxRow, type SessionRow } from './db/rows.js';

/** The error for a session that is gone: deleted in this tab or another one. */
export function sessionNotFound(userId: string, sessionId: string): TabulaError {
  return new TabulaError(
    'session/not-found',
    `Session "${sessionId}" of user "${userId}" no longer exists (deleted here or in another tab); open it again with tabula.session() to start afresh.`,
  );
}

/** Builds and applies ops inside a write transaction. */
export interface Emitter {
  /** The session row as it is now in this transaction (undefined before session.create). */
  row(): SessionRow | undefined;
  /**
   * The session row; throws `session/not-found` when the session is gone, or when `life` (a
   * `lifeOf(row)` read earlier) is given and the session was deleted and re-created since.
   */
  existing(life?: string): SessionRow;
  /** A fresh order key, after every op of the session so far. */
  nextOrder(): string;
  /** Makes an op with a fresh order key (after every op of the session), applies it, returns it. */
  emit<K extends OpKind>(kind: K, body: OpBody<K>): Promise<Op>;
  /**
   * Emits one message.append op per body, applied as one batch (see
   * `applyAppends`); `orders[i]`, when given, is body i's order key.
   */
  emitAppends(bodies: readonly OpBody<'message.append'>[], orders?: readonly string[]): Promise<AppendOp[]>;
}

/**
 * The tables a write that only appends messages touches, by name (a Dexie transaction and a native one
 * both take names): the session row, the messages, meta (removed-message tombstones, the outbox counter)
 * and the outbox. A readwrite transaction over 4 stores instead of 9 costs less to start and waits on
 * fewer other transactions (another tab's reads of runs, journal, notes…).
 */
const APPEND_STORES = ['sessions', 'messages', 'meta', 'outbox'];

/** Which tables a write's transaction spans: every table of the sessions, or only those an append touches. */
export type WriteScope = 'session' | 'append';

/**
 * Runs `build` in one readwrite transaction over the session's tables and
 * publishes the change after commit. `what` describes the write for errors.
 * With `scope` 'append', build may only append messages (emitAppends).
 *
 * An append to a session whose row this Tabula knows (see known-rows.ts) does not wait for the row:
 * its read, the message add and the row write go to IndexedDB together, built on the known row, and
 * the transaction commits only if the row read equals it. IndexedDB runs a transaction's requests in
 * the order they were made, so the read sees the row as committed before this write; when it differs,
 * the transaction aborts (nothing lands) and the write runs again from the row it reads. Such an append
 * is made on a native IndexedDB transaction rather than Dexie's (see native-requests.ts), through the
 * same write path; the retry, and every other write, goes through Dexie.
 */
export async function commit<T>(
  store: StoreContext,
  userId: string,
  sessionId: string,
  what: string,
  build: (tx: Emitter) => Promise<T>,
  scope: WriteScope = 'session',
): Promise<T> {
  assertOpen(store);
  const known = scope === 'append' ? store.knownRows.get(userId, sessionId) : undefined;
  if (known) {
    try {
      return await attempt(store, userId, sessionId, what, build, scope, known);
    } catch (error) {
      if (!(error instanceof StaleKnownRow)) throw error;
    }
  }
  return attempt(store, userId, sessionId, what, build, scope, undefined);
}

async function attempt<T>(
  store: StoreContext,
  userId: string,
  sessionId: string,
  what: string,
  build: (tx: Emitter) => Promise<T>,
  scope: WriteScope,
  known: SessionRow | undefined,
): Promise<T> {
  const { db, clock } = store;
  const applied: Op[] = [];
  // Every op this replica folded in, applied or not: one that changed nothing here (a second
  // markCommitted) still moved the session's lastOrder and updatedAt, so the other replicas need it too.
  const emitted: Op[] = [];
  let committed: SessionRow | undefined;
  let queued: OutboxRow[] = [];
  // With a known row: the reads that check it, made before any write of this transaction.
  const checks: Promise<boolean>[] = [];
  /** Builds the write and issues its requests, through Dexie's tables or a native transaction's. */
  const write = async (requests: WriteRequests): Promise<T> => {
    const key: [string, string] = [userId, sessionId];
    // The user's outbox counter is read with the write's first requests, not after them: one round trip
    // less before the write commits and sync can push it. Its row also says whether the user has synced on
    // this profile: then the write is queued even with sync off here, so nothing written is left behind.
    const counter = store.sync ? requests.meta.get(syncNames.seq(userId)) : undefined;
    counter?.catch(() => undefined);
    let slot: SessionSlot;
    if (known) slot = knownSlot(requests, key, known, checks);
    else slot = await loadSlot(db, userId, sessionId);
    let after = slot.row?.lastOrder ?? '';
    // The life a create starts when there is no row: after the session's last delete ('' for none).
    let ended = '';
    if (!slot.row) {
      // A deleted session's tombstone may be ahead of this tab's clock (another tab's clock, or the
      // system clock stepped back): a re-create must sort after it, or applyOp would refuse it.
      ended = await tombstoneOf(db, slot);
      if (ended > after) after = ended;
    }
    /**
     * The life every op written now names (see `Op.after`): the row's, or the one a create starts.
     * A row created before lives were named has none: its ops keep naming none.
     */
    const lifeAfter = (): { after?: string } => {
      const life = slot.row ? slot.row.after : ended;
      return life === undefined ? {} : { after: life };
    };
    const nextOrder = (): string => {
      let order = clock.now();
      // Another tab or device may have written with a clock ahead of ours: stay causal (the clock does
      // not follow a key far ahead, so such a key keeps its place after this write's ops).
      if (order <= after) order = clock.receive(hlcOf(after));
      // Every op of a life is ordered after the delete it began after (the op schema requires it): a life
      // that began after a delete ordered far ahead gets its ops ordered after the session's last one,
      // however far ahead, without moving the clock.
      const life = slot.row ? (slot.row.after ?? '') : ended;
      if (order <= life) order = keyAfter(after > life ? after : life, clock.clientId);
      if (order > after) after = order;
      return order;
    };
    const emitter: Emitter = {
      row: () => slot.row,
      existing(life) {
        if (!slot.row || (life !== undefined && lifeOf(slot.row) !== life)) throw sessionNotFound(userId, sessionId);
        return slot.row;
      },
      nextOrder,
      async emit(kind, body) {
        // applyOp's requests go through Dexie's tables, outside the transaction of a write scoped to appends.
        if (scope === 'append') throw new TabulaError('argument/invalid', `emit(${kind}) in an append-only write`);
        // The op's order is `after` itself, and applying it moves lastOrder no further: nothing to catch up.
        const op = { id: newId(), kind, userId, sessionId, order: nextOrder(), ...lifeAfter(), body } as Op;
        emitted.push(op);
        if (await applyOp(db, slot, op)) applied.push(op);
        if (kind === 'session.delete' && !slot.row) ended = op.order;
        return op;
      },
      async emitAppends(bodies, orders) {
        const ops = bodies.map(
          (body, index): AppendOp => ({ id: newId(), kind: 'message.append', userId, sessionId, order: orders?.[index] ?? nextOrder(), ...lifeAfter(), body }),
        );
        emitted.push(...ops);
        applied.push(...(await applyAppends(requests, slot, ops)));
        // Orders the caller gave (an import's, derived from one key) may sort after `after`: later ops follow them.
        if (slot.row && slot.row.lastOrder > after) after = slot.row.lastOrder;
        return ops;
      },
    };
    let value: T;
    try {
      value = await build(emitter);
    } catch (error) {
      // The error may be the guess's (a session that is there after all).
      await knownRowsHeld(checks);
      throw error;
    }
    await flushSlot(requests, slot);
    await knownRowsHeld(checks);
    const synced = emitted.filter(isSynced);
    if (counter && synced.length > 0 && (store.sync?.userId === userId || (await counter) !== undefined)) {
      // Before the rows are queued: a refused write lands nothing (its transaction aborts). Not the update that
      // ends a stream (done(), abort(), recovery): its text is written already, and refusing it would leave the
      // message streaming for good; one too large is refused by the server and parked instead.
      for (const op of synced) if (op.kind !== 'message.update') checkOpSize(op);
      queued = await queueOutbox(requests, userId, synced, counter);
    }
    committed = slot.row;
    return value;
  };
  let result: T;
  try {
    // An append built on a known row skips Dexie's transaction machinery (see native-requests.ts): its
    // build only appends, and awaits nothing but its own requests. Every other write goes through Dexie,
    // whose scope function must itself be async for Dexie to follow the native awaits in `write`.
    const native = known ? nativeTransaction(db, APPEND_STORES, 'readwrite') : null;
    result = native ? await writeNatively(native, write, checks) : await db.transaction('rw', scope === 'append' ? APPEND_STORES : sessionTables(db), async () => write(dexieRequests(db)));
  } catch (error) {
    store.knownRows.set(userId, sessionId, undefined);
    if (error instanceof StaleKnownRow) throw error;
    throw mapStorageError(error, what);
  }
  afterCommit(store, {
    origin: 'local',
    rows: [{ userId, sessionId, row: committed }],
    changes: applied.length > 0 ? [{ userId, sessionId, kinds: [...new Set(applied.map((op) => op.kind))] }] : [],
    queued: new Map([[userId, queued]]),
  });
  return result;
}

/**
 * Runs `write` on a native readwrite transaction and resolves once the transaction has committed:
 * durable, as Dexie's would be. A known row that the stored one no longer equals aborts the transaction
 * from the check's own callback, while the write's other requests are still pending: nothing of it can
 * land, whatever the write does next. When `write` fails, the transaction is aborted before the failure
 * is passed on, so a rejected write has landed nothing.
 */
async function writeNatively<T>(tx: IDBTransaction, write: (requests: WriteRequests) => Promise<T>, checks: readonly Promise<boolean>[]): Promise<T> {
  const done = transactionDone(tx);
  const writing = write(nativeRequests(tx));
  for (const check of checks) {
    // A check that fails to read has failed the transaction already: nothing to abort.
    void check.then(
      (held) => {
        if (!held) abortTransaction(tx);
      },
      () => undefined,
    );
  }
  let value: T;
  try {
    value = await writing;
  } catch (error) {
    abortTransaction(tx);
    await done.catch(() => undefined);
    throw error;
  }
  await done;
  return value;
}
