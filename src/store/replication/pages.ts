/**
 * Applying a page of the user's items from the sync server (a pull's, or a
 * poke's that carried its push's items): the ops go through `applyOps`, the
 * one write path, in one transaction with the cursor's move; then the board
 * updates, then the steps every commit takes (after-commit.ts). The page has
 * passed the wire protocol's schema; what it means here (whose ops, which
 * life, whether it continues the cursor) is decided here.
 */
import { TabulaError } from '../../core/errors.js';
import { hlcOf, parseHlc } from '../../core/hlc.js';
import type { Op, OpKind } from '../../core/ops.js';
import { afterCommit } from '../after-commit.js';
import { mapStorageError } from '../errors.js';
import { applyOps, StaleKnownRow, type ApplyOptions, type DroppedWork, type SaveConflict } from '../apply/index.js';
import type { DroppedWorkInfo, SaveConflictInfo } from '../changes.js';
import { sessionTables } from '../db/schema.js';
import type { StoreContext } from '../context.js';
import type { SyncBoards } from './board-access.js';
import { applyRemoteBoard, decodeBoardUpdates, updatesForLife } from './boards.js';
import type { PageOutcome, PulledPage } from './contract.js';
import { syncNames } from './keys.js';

/** The pull cursor a meta row holds; null before the first page (a pull from the start). */
export function cursorOf(row: { value: unknown } | undefined): string | null {
  return typeof row?.value === 'string' ? row.value : null;
}

/** Aborts the transaction of a page that this client already has ('current') or that does not continue its cursor ('stale'). */
class NotTaken extends Error {
  constructor(readonly outcome: 'current' | 'stale') {
    super(`page not taken: ${outcome}`);
  }
}

/** What a page applies with: the store, the user, the client id of the user's pushes, the user's boards. */
export interface PageTarget {
  readonly store: StoreContext;
  readonly userId: string;
  clientId(): Promise<string>;
  readonly boards: SyncBoards;
}

/**
 * Applies one page of the user's items, a pull's or a poke's, and moves the cursor to `page.cursor`:
 * ops first in one transaction with applyOps (a board update may belong to a session this page
 * creates), then the board updates, then the cursor, so a crash before the cursor moves gets the page
 * again and both ops and updates apply once. With `from` (the cursor a pull asked from, or a poke's
 * `after`), only when the stored cursor is exactly `from.after`, read in the ops' transaction:
 * 'current' when it already is `page.cursor`, 'stale' for any other (the items do not continue it;
 * pull again from the stored cursor). Nothing is applied then. Items of this client's own pushes are
 * skipped (they are applied here already).
 */
export async function applyPage(target: PageTarget, page: PulledPage, from?: { readonly after: string | null }): Promise<PageOutcome> {
  const { store, userId } = target;
  const { db } = store;
  const cursorKey = syncNames.cursor(userId);
  const clientKey = syncNames.clientId(userId);
  const id = await target.clientId();
  const ops: Op[] = [];
  const boardItems: { index: number; sessionId: string; update: string; after: string | undefined }[] = [];
  for (const [index, item] of page.items.entries()) {
    if ('board' in item) {
      if (item.clientId !== id) boardItems.push({ index, sessionId: item.board.sessionId, update: item.board.update, after: item.board.after });
      continue;
    }
    if (item.op.userId !== userId) {
      throw new TabulaError('sync/forbidden', `The sync server sent items[${index}].op for user "${item.op.userId}", not "${userId}"; nothing of that page was applied.`);
    }
    if (item.clientId !== id) ops.push(item.op);
  }
  // A board update that names no life (written before lives were named) and that a delete of its
  // session follows in this page belongs to a life that ended: applied after the page's ops, it would
  // land in the session created again. Updates that name their life go only to that life (updatesForLife).
  const deletedAt = new Map<string, number>();
  for (const [index, item] of page.items.entries()) if ('op' in item && item.op.kind === 'session.delete') deletedAt.set(item.op.sessionId, index);
  const boards = decodeBoardUpdates(boardItems.filter((item) => item.after !== undefined || (deletedAt.get(item.sessionId) ?? -1) < item.index));
  const conflicts: SaveConflict[] = [];
  const dropped: DroppedWork[] = [];
  const settled: NonNullable<ApplyOptions['settled']> = [];
  /** One transaction: the page's ops, the cursor check and move; on the session rows this tab knows, or read. */
  const attempt = (known: boolean): Promise<Op[]> =>
    // A page of this client's own items only moves the cursor (a poke of its own push, mostly): no
    // reason to lock every session table for that.
    db.transaction('rw', ops.length === 0 ? [db.meta] : sessionTables(db), async () => {
      conflicts.length = 0;
      dropped.length = 0;
      settled.length = 0;
      // The cursor is read, and moved, alongside applyOps' requests rather than before and after them
      // (IndexedDB runs a transaction's requests in order, so the read sees the old cursor): two round
      // trips less before the change shows. Items that do not continue the cursor abort the whole
      // transaction, applyOps and the move with it.
      // The client id too: another tab that started the user's state over (a server reset) took the cursor
      // away, and a page of the old server must not put one back.
      const stored = from ? db.meta.bulkGet([cursorKey, clientKey]) : undefined;
      const moved = boards.size === 0 && page.cursor !== null ? db.meta.put({ key: cursorKey, value: page.cursor }) : undefined;
      const [rows, done] = await Promise.all([stored, applyOps(db, ops, { conflicts, dropped, settled, ...(known ? { known: store.knownRows } : {}) }), moved]);
      if (from) {
        const cursor = cursorOf(rows?.[0]);
        if (rows?.[1]?.value !== id) throw new NotTaken('stale');
        if (cursor === page.cursor) throw new NotTaken('current');
        if (cursor !== from.after) throw new NotTaken('stale');
      }
      return done;
    });
  let applied: Op[];
  try {
    try {
      applied = await attempt(true);
    } catch (error) {
      // Another tab wrote a session since this tab last saw it: nothing landed; again, from the stored rows.
      if (!(error instanceof StaleKnownRow)) throw error;
      applied = await attempt(false);
    }
  } catch (error) {
    if (error instanceof NotTaken) return error.outcome;
    throw error;
  }
  // Before the page's board updates: opening a board of the new life closes the ended life's here.
  const withBoards = await compareBoards(store, dropped);
  for (const [sessionId, updates] of boards) {
    // A board of a session that does not exist here (deleted on this device) has nowhere to go.
    const board = await target.boards.open(sessionId);
    if (!board) continue;
    try {
      const ofThisLife = updatesForLife(board, updates);
      if (ofThisLife.length > 0) await applyRemoteBoard(db, userId, sessionId, board, ofThisLife);
    } finally {
      await board.release();
    }
  }
  if (boards.size > 0 && page.cursor !== null) {
    const next = page.cursor;
    // Moved only if nothing started the user's state over meanwhile (a reset in another tab): see the ops' transaction.
    await db.transaction('rw', db.meta, async () => {
      const [cursor, client] = await db.meta.bulkGet([cursorKey, clientKey]);
      if (client?.value === id && (!from || cursorOf(cursor) === from.after)) await db.meta.put({ key: cursorKey, value: next });
    });
  }
  // What this device writes next follows what it has seen, in whichever session (another device's
  // writes within the clock's precision would otherwise be ordered after this device's later ones).
  for (const op of ops) store.clock.receive(hlcOf(op.order));
  afterCommit(store, { origin: 'remote', rows: settled, changes: await changesOf(store, applied, conflicts, withBoards) });
  return 'applied';
}

/** Work a delete dropped, its board compared: the keys of the ended life's board its deleter never saw. */
type ComparedWork = Omit<DroppedWork, 'board'> & { readonly blackboard: readonly string[] };

/**
 * The work the page's deletes dropped, with the board of each ended life compared with what its deleter
 * had (`DroppedWork.board`): after the ops' transaction (the boards are in databases of their own) and
 * before anything deletes the ended life's board (after-commit.ts, once the change is out). Work left
 * with nothing named is left out. A board that cannot be read names nothing; the failure is reported.
 */
async function compareBoards(store: StoreContext, dropped: readonly DroppedWork[]): Promise<ComparedWork[]> {
  const compared: ComparedWork[] = [];
  for (const { board, ...work } of dropped) {
    let blackboard: string[] = [];
    if (board) {
      try {
        blackboard = await store.boards.unseenKeys(work.userId, work.sessionId, board.life, board.seen);
      } catch (error) {
        store.onError(mapStorageError(error, `read the blackboard of session "${work.sessionId}" that a delete from another device ended`));
      }
    }
    if (work.messages.length > 0 || work.memory.length > 0 || work.notes.length > 0 || work.state || blackboard.length > 0) compared.push({ ...work, blackboard });
  }
  return compared;
}

/** The changes a page made, one per session: the kinds of op applied, a save of this device's that lost, the work a delete dropped. */
async function changesOf(store: StoreContext, applied: readonly Op[], conflicts: readonly SaveConflict[], dropped: readonly ComparedWork[]) {
  const bySession = new Map<string, { userId: string; sessionId: string; kinds: Set<OpKind>; conflict?: SaveConflictInfo; dropped?: DroppedWorkInfo }>();
  const entryOf = (userId: string, sessionId: string) => {
    const key = JSON.stringify([userId, sessionId]);
    const entry = bySession.get(key) ?? { userId, sessionId, kinds: new Set<OpKind>() };
    bySession.set(key, entry);
    return entry;
  };
  for (const op of applied) entryOf(op.userId, op.sessionId).kinds.add(op.kind);
  // Only the device whose save lost hears of it; the others just see the winner.
  for (const { userId, sessionId, lost, won } of conflicts) {
    if (await isLocalOrder(store, lost.order)) entryOf(userId, sessionId).conflict = { version: lost.version, local: lost.state, remote: won.state };
  }
  for (const { userId, sessionId, messages, memory, notes, state, blackboard } of dropped) {
    const entry = entryOf(userId, sessionId);
    const before = entry.dropped;
    const keys = [...new Set([...(before?.blackboard ?? []), ...blackboard])].sort();
    entry.dropped = {
      messages: [...(before?.messages ?? []), ...messages],
      memory: [...(before?.memory ?? []), ...memory],
      notes: [...(before?.notes ?? []), ...notes],
      state: (before?.state ?? false) || state,
      // Absent when no key is named: what the change said before boards were compared.
      ...(keys.length > 0 ? { blackboard: keys } : {}),
    };
  }
  return [...bySession.values()].map(({ kinds, ...change }) => ({ ...change, kinds: [...kinds] }));
}

/** True when an order key was made by a clock of this profile (a save made here: see `syncNames.localClock`). */
async function isLocalOrder(store: StoreContext, order: string): Promise<boolean> {
  return (await store.db.meta.get(syncNames.localClock(parseHlc(hlcOf(order)).clientId))) !== undefined;
}
