/**
 * Checkpoints: a checkpoint is stored once by its id, and a restore acts as
 * a clear followed by the checkpoint's messages (which take order keys
 * derived from the restore, and the updates and removes ordered after it,
 * whichever arrived first), plus a prefix and a state save of its own (the
 * prefix's and state's rules: state.ts).
 *
 * A checkpoint larger than one op may be comes as its head (checkpoint.create
 * with a `count`) and parts (checkpoint.part), each placing its messages by
 * position. The row is complete, listed and restorable, once every position
 * has its message; until then it keeps the parts by position (a part applied
 * twice, or overlapping one already there, adds nothing), and a restore of
 * it waits on the row, applied when the last part comes, as if it had
 * arrived then. The parts of a checkpoint come from one device's one write
 * (or one re-upload), after its head: sync delivers one device's ops in
 * order, so a part without its head is not expected and is dropped, as an op
 * without its session's create is.
 */
import { subOrder } from '../../core/hlc.js';
import type { CheckpointMessage } from '../../core/ops.js';
import { messageRow, type CheckpointRow, type MessageRow } from '../db/rows.js';
import { messageUpdatesKey, removedMessageKey } from '../db/keys.js';
import * as legacy from './legacy.js';
import { countMessages, dropMessagesBefore, withLaterUpdates, type UpdateRegister } from './messages.js';
import { changed, type OpOf, type Rule } from './slot.js';
import { setVersion, settleSummary, versionWins } from './state.js';

/** checkpoint.create: stores the checkpoint once, by its id. */
export const createCheckpoint: Rule<'checkpoint.create'> = async (db, slot, _row, op) => {
  if (await db.checkpoints.get(op.body.id)) return false;
  const { count, snapshot } = op.body;
  const parted = count !== undefined && count > snapshot.messages.length;
  await db.checkpoints.add({
    id: op.body.id,
    userId: op.userId,
    sessionId: op.sessionId,
    label: op.body.label,
    at: op.body.at,
    order: op.order,
    snapshot,
    ...(parted ? { pending: { count, chunks: [], restores: [] } } : {}),
  });
  return changed(slot);
};

/**
 * checkpoint.part: keeps the part's messages with the checkpoint's head, by position; once every position
 * up to the head's `count` has its message, the row becomes the whole checkpoint and the restores that
 * waited for it are applied, in order.
 */
export const addCheckpointPart: Rule<'checkpoint.part'> = async (db, slot, row, op) => {
  const checkpoint = await db.checkpoints.get(op.body.id);
  if (!checkpoint || checkpoint.userId !== op.userId || checkpoint.sessionId !== op.sessionId || !checkpoint.pending) return false;
  const { pending } = checkpoint;
  const head = checkpoint.snapshot.messages.length;
  const { from, messages } = op.body;
  const end = Math.min(from + messages.length, pending.count);
  // A part already here (applied twice, or another split's covering the same positions) adds nothing.
  if (end <= from || covered(head, pending.chunks, from, end)) return false;
  const chunks = [...pending.chunks, { from, messages: messages.slice(0, end - from) }].sort((a, b) => a.from - b.from);
  const assembled = assemble(checkpoint.snapshot.messages, chunks, pending.count);
  if (!assembled) {
    await db.checkpoints.put({ ...checkpoint, pending: { ...pending, chunks } });
    return changed(slot);
  }
  const { pending: _done, ...complete } = checkpoint;
  await db.checkpoints.put({ ...complete, snapshot: { ...checkpoint.snapshot, messages: assembled } } satisfies CheckpointRow);
  // Restores of this checkpoint that came before it was whole: each acts now as it would have on arrival
  // (its rule orders it against the clears, saves, updates and removes by order keys, whatever came first).
  const restores = pending.restores.filter((r): r is OpOf<'checkpoint.restore'> => r.kind === 'checkpoint.restore');
  for (const restore of restores.sort((a, b) => (a.order < b.order ? -1 : 1))) await restoreCheckpoint(db, slot, row, restore);
  return changed(slot);
};

/** True when positions `from` to `end` (exclusive) all have a message: in the head (below `head`) or in a chunk. */
function covered(head: number, chunks: readonly { from: number; messages: readonly unknown[] }[], from: number, end: number): boolean {
  let reach = from;
  // Chunks are sorted by `from`, and the head's span starts at 0.
  for (const span of [{ from: 0, length: head }, ...chunks.map((chunk) => ({ from: chunk.from, length: chunk.messages.length }))]) {
    if (span.from > reach) break;
    reach = Math.max(reach, span.from + span.length);
  }
  return reach >= end;
}

/** The checkpoint's `count` messages, from its head and chunks (sorted by `from`); undefined while a position has none. */
function assemble(head: readonly CheckpointMessage[], chunks: readonly { from: number; messages: readonly CheckpointMessage[] }[], count: number): CheckpointMessage[] | undefined {
  const messages = [...head];
  for (const chunk of chunks) {
    if (chunk.from > messages.length) return undefined;
    messages.push(...chunk.messages.slice(messages.length - chunk.from));
  }
  return messages.length >= count ? messages.slice(0, count) : undefined;
}

/**
 * checkpoint.restore: the messages as a clear followed by the snapshot's (unless a later clear or restore
 * has superseded them), the prefix by its order, the state as a save of the restore's version.
 */
export const restoreCheckpoint: Rule<'checkpoint.restore'> = async (db, slot, row, op) => {
  const checkpoint = await db.checkpoints.get(op.body.id);
  if (!checkpoint || checkpoint.userId !== op.userId || checkpoint.sessionId !== op.sessionId) return false;
  if (checkpoint.pending) {
    // Not yet whole (the restoring device had it whole, so its parts are on the way): applied now it would
    // put back only some of the messages, and dropped it would be lost. It waits with the checkpoint.
    if (checkpoint.pending.restores.some((waiting) => waiting.id === op.id)) return false;
    await db.checkpoints.put({ ...checkpoint, pending: { ...checkpoint.pending, restores: [...checkpoint.pending.restores, op] } });
    return changed(slot);
  }
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
