/**
 * The rules that exist only for data written before a feature did: ops that
 * name no session life (before `after`), saves without a `base`, journal
 * commits that count entries instead of naming the last one (before
 * `through`), and message rows written before update registers. The rule
 * modules call in here by name (`legacy.…`), so that once no such data can
 * reach a replica this module goes in one piece, with its call sites. Left
 * where they are, because they are one expression of a current rule: the
 * `?? default` reads of row fields that older rows lack (their types say
 * so), an update without `order`/`createdAt` waiting for its append, a
 * partial state patch, a delete without `seen`.
 */
import type { Op } from '../../core/ops.js';
import { tombstoneKey } from '../db/keys.js';
import { type MessageRow, type SessionRow } from '../db/rows.js';
import { type TabulaDb } from '../db/schema.js';
import { changed, endLife, tombstoneOf, type OpOf, type Rule, type SessionSlot } from './slot.js';

/**
 * Places an op that names no life (written before lives were named) by the older rules, as `enterLife`
 * places one that does: a create ordered at or before the tombstone is a replay from before a delete, a
 * delete of a session already gone only moves the tombstone, and an op ordered before the session's
 * create is of an earlier life. Returns 'dead' for an op to drop, 'live' for one its rule applies.
 */
export async function placeUnnamed(db: TabulaDb, slot: SessionSlot, op: Op): Promise<'dead' | 'live'> {
  if (op.kind === 'session.create') {
    // A replayed create from before a delete must not bring the session back.
    const tombstone = await db.meta.get(tombstoneKey(op.userId, op.sessionId));
    if (tombstone && typeof tombstone.value === 'string' && op.order <= tombstone.value) return 'dead';
    return 'live';
  }
  const existing = slot.row;
  if (!existing) {
    // A delete of a session already gone still moves its tombstone forward, as it would have in order.
    if (op.kind === 'session.delete' && op.order > (await tombstoneOf(db, slot))) await endLife(db, slot, op.order);
    return 'dead';
  }
  // Ops older than the session's creation (a replayed delete, say) belong to an earlier life of this id.
  if (op.order < existing.createdOrder) return 'dead';
  return 'live';
}

/** `sameLife` for an op that names no life: one ordered before the row's create is of an earlier life. */
export function sameLifeByCreate(row: SessionRow, op: Op): boolean {
  return op.order >= row.createdOrder;
}

/**
 * session.delete of a delete that names no life, placed in the row's life by {@link placeUnnamed}: it
 * ends that life. (A delete that names its life is settled by `enterLife` and never reaches a rule.)
 */
export const endUnnamedLife: Rule<'session.delete'> = async (db, slot, _row, op) => {
  await endLife(db, slot, op.order);
  return true;
};

/** Whether a save without `base` replaces a save it was not built on: it counts as built on any save of a lower version. */
export function conflictWithoutBase(version: number, row: SessionRow): boolean {
  return version === row.version;
}

/**
 * The watermark of a session whose commits count entries (journal.commit without `through`): the count
 * committed, capped by the entries here. Raised when entries arrive after their commit.
 */
export function watermarkByCount(row: SessionRow): void {
  const committed = row.journalCommitted ?? row.journalWatermark;
  row.journalCommitted = committed;
  row.journalWatermark = Math.min(committed, row.journalCount);
}

/**
 * journal.commit without `through`: the greatest count wins, remembered even when the entries have not
 * arrived yet; ignored once a commit names its entry.
 */
export function commitByCount(slot: SessionSlot, row: SessionRow, op: OpOf<'journal.commit'>): boolean {
  if (row.journalThrough !== undefined) return false;
  // Remember what was committed even when the entries have not arrived yet; they raise the watermark when they do.
  const committed = Math.max(row.journalCommitted ?? row.journalWatermark, op.body.watermark);
  if (committed === row.journalCommitted) return false;
  row.journalCommitted = committed;
  row.journalWatermark = Math.min(committed, row.journalCount);
  return changed(slot);
}

/**
 * A restored copy with the last update of its original when that update is ordered after the restore:
 * rows written before update registers existed carry their last update themselves (the register holds
 * every later one).
 */
export function withStoredUpdate(copy: MessageRow, original: MessageRow | undefined, op: OpOf<'checkpoint.restore'>): MessageRow {
  return original?.updateOrder === undefined || original.updateOrder <= op.order ? copy : { ...copy, status: original.status, message: original.message, updateOrder: original.updateOrder };
}
