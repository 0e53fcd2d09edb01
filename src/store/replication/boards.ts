/**
 * Blackboards over sync. A board lives in its own y-indexeddb database, so
 * no transaction can hold a board change and an outbox row together. The
 * persisted board is the source of truth instead: the leader queues what
 * the server has not been sent, by state vector against a snapshot of what
 * was queued before, and writes that outbox row and the new snapshot in one
 * transaction. Whatever crashes in between, a change is either in a queued
 * row (pushed, retried, never recomputed) or still differs from the
 * snapshot (queued next time). When to queue, and which boards, is
 * board-access.ts's; this module holds the rule for one board.
 */
import { fromBase64, toBase64 } from 'lib0/buffer';
import * as Y from 'yjs';
import { TabulaError } from '../../core/errors.js';
import { REMOTE_ORIGIN } from '../../blackboard/registry.js';
import { checkBlackboardUpdate } from '../../blackboard/validate.js';
import { dexieRequests } from '../requests.js';
import type { TabulaDb } from '../db/schema.js';
import type { SyncBoard } from './board-access.js';
import { BOARD_QUEUED_PREFIX } from './keys.js';
import { queueOutbox } from './outbox.js';

/**
 * The meta key of the snapshot of a board life as queued for the server (base64 of `Y.encodeSnapshot`).
 * One per life: a re-created session's board is a new doc, and comparing it with the old life's snapshot
 * would queue again what the server sent it. A board of a life with no name keeps the key it always had.
 */
function queuedKey(userId: string, sessionId: string, after: string | undefined): string {
  return `${BOARD_QUEUED_PREFIX}${JSON.stringify(after === undefined ? [userId, sessionId] : [userId, sessionId, after])}`;
}

/** The snapshot queued for the board's life, or null when none is (nothing of this life queued yet). */
async function readQueued(db: TabulaDb, key: string): Promise<Y.Snapshot | null> {
  const stored = await db.meta.get(key);
  return typeof stored?.value === 'string' ? Y.decodeSnapshot(fromBase64(stored.value)) : null;
}

/**
 * Stores the queued snapshot of a board life. The first one of a life drops those of the session's other
 * lives: they ended (a board is opened for the current life only), and nothing else ever removes them.
 */
async function writeQueued(db: TabulaDb, userId: string, sessionId: string, key: string, snapshot: Y.Snapshot, first: boolean): Promise<void> {
  if (first) {
    // JSON escapes quotes inside strings, so this prefix matches this session's keys and no other's.
    const prefix = `${BOARD_QUEUED_PREFIX}${JSON.stringify([userId, sessionId]).slice(0, -1)}`;
    await db.meta.where('key').startsWith(prefix).and((row) => row.key !== key).delete();
  }
  await db.meta.put({ key, value: toBase64(Y.encodeSnapshot(snapshot)) });
}

/**
 * Queues what `board` holds beyond the snapshot already queued; returns true when it queued a row.
 * Deletions do not move a state vector, so "changed" compares snapshots (state vector and delete set).
 */
export function queueBoard(db: TabulaDb, userId: string, sessionId: string, board: SyncBoard): Promise<boolean> {
  const key = queuedKey(userId, sessionId, board.after);
  return db.transaction('rw', [db.outbox, db.meta], async () => {
    const stored = await readQueued(db, key);
    const queued = stored ?? Y.emptySnapshot;
    const now = Y.snapshot(board.doc);
    if (Y.equalSnapshots(queued, now)) return false;
    const update = toBase64(Y.encodeStateAsUpdate(board.doc, Y.encodeStateVector(queued.sv)));
    // The update names the board's session life, so that no replica applies it to another life.
    await queueOutbox(dexieRequests(db), userId, [{ board: board.after === undefined ? { sessionId, update } : { sessionId, update, after: board.after } }]);
    await writeQueued(db, userId, sessionId, key, now, stored === null);
    return true;
  });
}

/** A decoded board update of a pulled page, with the session life it names (none: written before lives were named). */
export interface PulledBoardUpdate {
  readonly after: string | undefined;
  readonly bytes: Uint8Array;
}

/**
 * Decodes and checks the board updates of a pulled page before anything is applied, by session, with the
 * board rule the server stores pushes by (checkBlackboardUpdate, without a doc: the boards are not open
 * yet); throws `schema/invalid` naming the item when one fails it (it does not decode whole, holds a
 * subdocument, or would put a non-JSON value on a board).
 */
export function decodeBoardUpdates(items: readonly { index: number; sessionId: string; update: string; after: string | undefined }[]): Map<string, PulledBoardUpdate[]> {
  const bySession = new Map<string, PulledBoardUpdate[]>();
  for (const { index, sessionId, update, after } of items) {
    const bytes = fromBase64(update);
    const problem = checkBlackboardUpdate(bytes);
    if (problem) {
      throw new TabulaError('schema/invalid', `The sync server sent items[${index}].board for session "${sessionId}" that cannot be applied: ${problem}; nothing of that page was applied.`);
    }
    const list = bySession.get(sessionId) ?? [];
    list.push({ after, bytes });
    bySession.set(sessionId, list);
  }
  return bySession;
}

/**
 * The updates that belong on `board`: those of its session life. An update of another life is dropped:
 * an older life ended with a delete this replica has applied, and a newer one is not this board's (its
 * create comes before it in the server's order, so by now the session is of that life or a later one).
 * An update that names no life (written before lives were named) goes to the current life.
 */
export function updatesForLife(board: SyncBoard, updates: readonly PulledBoardUpdate[]): Uint8Array[] {
  return updates.filter((update) => update.after === undefined || update.after === board.after).map((update) => update.bytes);
}

/**
 * Applies updates from the server to a board (origin 'remote', so the
 * board's listeners say where they came from) and waits until they are
 * stored. The server has what it sent: when nothing of this device was
 * waiting to be queued, the queued snapshot moves along, so the update is
 * not sent back. The snapshot is the board life's own, so this holds for a
 * session deleted and created again too.
 *
 * The snapshot recorded is the board as the update left it, taken inside
 * the transaction that applied it, before its observers run: an edit made
 * by an observe() listener reacting to the update (how an agent answers on
 * the board), or a microtask or a task later while the update is stored, is
 * this device's own and must still be queued. The board after the wait
 * would count it as the server's: never pushed, nor any later edit built on
 * it, and `pending 0` all along.
 */
export async function applyRemoteBoard(db: TabulaDb, userId: string, sessionId: string, board: SyncBoard, updates: readonly Uint8Array[]): Promise<void> {
  const { doc } = board;
  const before = Y.snapshot(doc);
  const update = updates.length === 1 ? (updates[0] as Uint8Array) : Y.mergeUpdates([...updates]);
  let applying: Y.Transaction | null = null;
  let applied: Y.Snapshot | null = null;
  // Yjs emits this for a transaction once its changes are integrated and before any observer is called; the
  // edits observers make are transactions of their own, cleaned up after this one.
  const capture = (transaction: Y.Transaction) => {
    if (transaction === applying) applied = Y.snapshot(doc);
  };
  doc.on('beforeObserverCalls', capture);
  try {
    // Not local, as Y.applyUpdate's own transaction would be (Yjs checks a remote one for a clash of client ids).
    Y.transact(
      doc,
      (transaction) => {
        applying = transaction;
        Y.applyUpdate(doc, update, REMOTE_ORIGIN);
      },
      REMOTE_ORIGIN,
      false,
    );
  } finally {
    doc.off('beforeObserverCalls', capture);
  }
  const queuedNow: Y.Snapshot = applied ?? before;
  await board.flushed();
  const key = queuedKey(userId, sessionId, board.after);
  await db.transaction('rw', db.meta, async () => {
    const stored = await readQueued(db, key);
    if (Y.equalSnapshots(stored ?? Y.emptySnapshot, before)) await writeQueued(db, userId, sessionId, key, queuedNow, stored === null);
  });
}
