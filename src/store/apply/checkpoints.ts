/**
 * Checkpoints: a checkpoint is stored once by its id, and a restore acts as
 * a clear followed by the checkpoint's messages (which take order keys
 * derived from the restore, and the updates and removes ordered after it,
 * whichever arrived first), plus a prefix and a state save of its own (the
 * prefix's and state's rules: state.ts).
 */
import { subOrder } from '../../core/hlc.js';
import { messageRow, type MessageRow } from '../db/rows.js';
import { messageUpdatesKey, removedMessageKey } from '../db/keys.js';
import * as legacy from './legacy.js';
import { countMessages, dropMessagesBefore, withLaterUpdates, type UpdateRegister } from './messages.js';
import { changed, type Rule } from './slot.js';
import { setVersion, settleSummary, versionWins } from './state.js';

/** checkpoint.create: stores the checkpoint once, by its id. */
export const createCheckpoint: Rule<'checkpoint.create'> = async (db, slot, _row, op) => {
  if (await db.checkpoints.get(op.body.id)) return false;
  await db.checkpoints.add({
    id: op.body.id,
    userId: op.userId,
    sessionId: op.sessionId,
    label: op.body.label,
    at: op.body.at,
    order: op.order,
    snapshot: op.body.snapshot,
  });
  return changed(slot);
};

/**
 * checkpoint.restore: the messages as a clear followed by the snapshot's (unless a later clear or restore
 * has superseded them), the prefix by its order, the state as a save of the restore's version.
 */
export const restoreCheckpoint: Rule<'checkpoint.restore'> = async (db, slot, row, op) => {
  const checkpoint = await db.checkpoints.get(op.body.id);
  if (!checkpoint || checkpoint.userId !== op.userId || checkpoint.sessionId !== op.sessionId) return false;
  const { snapshot } = checkpoint;
  const wins = versionWins(op.body.version, op.order, row);
  // A restore acts like a clear followed by the snapshot's messages, whether or not its state wins:
  // only a later clear or restore (already applied) supersedes its messages.
  const fresh = op.order > row.clearedBefore;
  if (!fresh && !wins && op.order <= row.prefixOrder) return false;
  if (fresh) {
    // A message removed by a remove ordered after the restore stays removed, whichever arrived first:
    // applied after the restore, that remove would take the copy away (see removeMessage). A remove
    // ordered before the restore leaves the copy, as the restore puts back what the checkpoint held.
    const removed = row.removedMessages
      ? await db.meta.bulkGet(snapshot.messages.map((m) => removedMessageKey(op.userId, op.sessionId, m.id)))
      : [];
    const kept = snapshot.messages.flatMap((m, index) => {
      const tombstone = removed[index]?.value;
      return typeof tombstone === 'string' && tombstone > op.order ? [] : [{ m, index }];
    });
    // An update ordered after the restore, already applied to the original, carries over to the copy,
    // as it would have if it had arrived after the restore.
    const originals = await db.messages.bulkGet(kept.map(({ m }) => [op.userId, op.sessionId, m.id] as [string, string, string]));
    const registers = await db.meta.bulkGet(kept.map(({ m }) => messageUpdatesKey(op.userId, op.sessionId, m.id)));
    await dropMessagesBefore(db, op.userId, op.sessionId, op.order);
    // Restored messages take order keys derived from the restore (and their place in the checkpoint),
    // so they sort as of now: a clear ordered before the restore cannot drop them, and appends still follow them.
    await db.messages.bulkPut(
      kept.map(({ m, index }, position) => {
        const copy: MessageRow = { ...m, order: subOrder(op.order, index), userId: op.userId, sessionId: op.sessionId };
        const carried = legacy.withStoredUpdate(copy, originals[position], op);
        // The register also holds updates applied to an original a clear has dropped since, or that arrived when no row was there.
        // Its status is known only now: the stream marker follows it.
        return messageRow(withLaterUpdates(carried, registers[position]?.value as UpdateRegister | undefined));
      }),
    );
    row.clearedBefore = op.order;
    row.messageCount = await countMessages(db, op.userId, op.sessionId);
    row.tokenTotals = {};
  }
  if (op.order > row.prefixOrder) {
    row.prefix = snapshot.prefix;
    row.prefixOrder = op.order;
  }
  if (wins) setVersion(slot, row, { version: op.body.version, order: op.order, base: op.body.base }, snapshot.state, true);
  else settleSummary(row);
  return changed(slot);
};
