/**
 * A session's messages once they are stored: updates (the greatest (status
 * rank, order) wins; an update kept per message id in its update register,
 * so a restored copy can take it later), removes (a tombstone, whichever
 * arrives first) and clears (messages ordered before the clear go). Also
 * which ops stay local (a stream's chunks). Appending is appends.ts's; a
 * restore's copies are checkpoints.ts's, built with the register read here.
 */
import type { JsonValue } from '../../core/json.js';
import type { Message } from '../../core/message.js';
import type { MessageStatus, Op } from '../../core/ops.js';
import { messageRow, type MessageRow, type SessionRow } from '../db/rows.js';
import { messageUpdatesKey, removedMessageKey } from '../db/keys.js';
import { sessionRange, type TabulaDb } from '../db/schema.js';
import { changed, type OpOf, type Rule } from './slot.js';
import { settleSummary } from './state.js';

/** Status rank of a message: a final status beats 'streaming', and 'complete' beats 'interrupted'. */
export const STATUS_RANK: Record<MessageStatus, number> = { streaming: 0, interrupted: 1, complete: 2 };

/**
 * Whether an op leaves the browser that made it. A stream's chunks stay local (architecture.md, Convergence): its final
 * update carries the order and createdAt its append had, so another replica stores the finished message
 * from it alone, and never holds a streaming message it cannot tell is still alive (its recovery would
 * mark it interrupted, for every device, while the stream goes on).
 */
export function isSynced(op: Op): boolean {
  return (op.kind !== 'message.append' && op.kind !== 'message.update') || op.body.status !== 'streaming';
}

/** Counts a session's messages (after a clear or restore dropped some). */
export function countMessages(db: TabulaDb, userId: string, sessionId: string): Promise<number> {
  return db.messages.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId)).count();
}

/** Drops a session's messages ordered before `order`. */
export function dropMessagesBefore(db: TabulaDb, userId: string, sessionId: string, order: string): Promise<number> {
  const [lower] = sessionRange(userId, sessionId);
  return db.messages.where('[userId+sessionId+order]').between(lower, [userId, sessionId, order]).delete();
}

/** Drops cached token totals that cover a message at `order` (it changed, or arrived out of order). */
export function invalidateTotals(row: SessionRow, order: string): void {
  for (const [counter, totals] of Object.entries(row.tokenTotals)) {
    if (order <= totals.upTo) delete row.tokenTotals[counter];
  }
}

/** A message's update register (see `messageUpdatesKey`): the latest update of each status. */
export type UpdateRegister = Partial<Record<MessageStatus, { order: string; message: Message }>>;

const STATUSES_BY_RANK: readonly MessageStatus[] = ['streaming', 'interrupted', 'complete'];

/** Records a message.update in its message's register, whether or not it changes the row. */
async function registerUpdate(db: TabulaDb, op: OpOf<'message.update'>): Promise<void> {
  const key = messageUpdatesKey(op.userId, op.sessionId, op.body.id);
  const register = (await db.meta.get(key))?.value as UpdateRegister | undefined;
  const latest = register?.[op.body.status];
  if (latest && latest.order >= op.order) return;
  const next: UpdateRegister = { ...register, [op.body.status]: { order: op.order, message: op.body.message } };
  await db.meta.put({ key, value: next as JsonValue });
}

/**
 * A restored copy as it is once every update ordered after it has been applied, as message.update
 * applies them (a higher status rank wins, then the later update): the greatest (rank, order).
 */
export function withLaterUpdates(copy: MessageRow, register: UpdateRegister | undefined): MessageRow {
  let result = copy;
  for (const status of STATUSES_BY_RANK) {
    const update = register?.[status];
    if (!update || update.order <= copy.order) continue;
    const rank = STATUS_RANK[status] - STATUS_RANK[result.status];
    if (rank > 0 || (rank === 0 && update.order > (result.updateOrder ?? result.order))) {
      result = { ...result, status, message: update.message, updateOrder: update.order };
    }
  }
  return result;
}

/** session.clear: drops the messages ordered before it (and the summary, unless a later save wrote it). */
export const clearSession: Rule<'session.clear'> = async (db, slot, row, op) => {
  if (op.order <= row.clearedBefore) return false;
  // Only messages ordered before the clear go: an append made concurrently on another device survives.
  await dropMessagesBefore(db, op.userId, op.sessionId, op.order);
  row.messageCount = await countMessages(db, op.userId, op.sessionId);
  row.clearedBefore = op.order;
  // The summary goes unless a save ordered after this clear wrote it.
  settleSummary(row);
  row.tokenTotals = {};
  return changed(slot);
};

/** message.update: the greatest (status rank, order) wins; one that arrives before its append stores the message. */
export const updateMessage: Rule<'message.update'> = async (db, slot, row, op) => {
  const { id, status, message, order, createdAt } = op.body;
  // Kept whatever happens to the row: a restore ordered before this update may bring the message
  // back later (after a clear dropped it, say), and the copy must end as if this came after it.
  await registerUpdate(db, op);
  const current = await db.messages.get([op.userId, op.sessionId, id]);
  if (!current) {
    // The update came first: it carries what the append would have stored (older ops do not).
    if (order === undefined || createdAt === undefined || order < row.clearedBefore) return false;
    await db.messages.add(messageRow({ id, userId: op.userId, sessionId: op.sessionId, order, createdAt, status, message, updateOrder: op.order }));
    row.messageCount += 1;
    invalidateTotals(row, order);
    return changed(slot);
  }
  // An update ordered before the row is about the original of a restored copy, which the restore replaced.
  if (op.order <= current.order) return false;
  // A final status beats 'streaming' and 'complete' beats 'interrupted'; within one status the later update wins.
  const rank = STATUS_RANK[status] - STATUS_RANK[current.status];
  if (rank < 0 || (rank === 0 && op.order <= (current.updateOrder ?? current.order))) return false;
  await db.messages.put(messageRow({ ...current, status, message, updateOrder: op.order }));
  invalidateTotals(row, current.order);
  return changed(slot);
};

/**
 * message.remove: removes a message and leaves a tombstone, in either arrival order: a
 * remove applied before its append (sync delivers out of order) still
 * keeps that append out. The tombstone is recorded whatever the order, so
 * replicas converge; returns false when the op changed nothing (a replay).
 */
export const removeMessage: Rule<'message.remove'> = async (db, slot, row, op) => {
  const key = removedMessageKey(op.userId, op.sessionId, op.body.id);
  const [tombstone, current] = await Promise.all([db.meta.get(key), db.messages.get([op.userId, op.sessionId, op.body.id])]);
  let removed = false;
  if (!tombstone) row.removedMessages = (row.removedMessages ?? 0) + 1;
  if (!tombstone || (typeof tombstone.value === 'string' && op.order > tombstone.value)) {
    await db.meta.put({ key, value: op.order });
    removed = true;
  }
  // A remove ordered before a clear or restore leaves the messages those put back (a restored copy stays).
  if (current && op.order >= row.clearedBefore) {
    await db.messages.delete([op.userId, op.sessionId, op.body.id]);
    row.messageCount -= 1;
    invalidateTotals(row, current.order);
    removed = true;
  }
  if (!removed) return false;
  return changed(slot);
};
