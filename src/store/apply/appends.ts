/**
 * The append fast path: a run of message.append ops of one session applied
 * as applying them one by one in order would, with one bulkAdd and the
 * session row written in the same round trip. Its requests go through
 * `WriteRequests` (Dexie's tables, or a native transaction: requests.ts), so
 * writer.ts can issue them on a known row. Also what happens when two
 * appends of one id meet (a replay, or two imports of one history). Which
 * runs may take this path is index.ts's.
 */
import type { OpBody } from '../../core/ops.js';
import { messageRow, type MessageRow, type SessionRow } from '../db/rows.js';
import { messageUpdatesKey, removedMessageKey } from '../db/keys.js';
import { dexieRequests, type WriteRequests } from '../requests.js';
import { sameLife, touch } from './lives.js';
import { invalidateTotals, STATUS_RANK, withLaterUpdates, type UpdateRegister } from './messages.js';
import type { OpOf, Rule, SessionSlot } from './slot.js';

/** A message.append op. */
export type AppendOp = OpOf<'message.append'>;

function appendedRow(op: AppendOp, body: OpBody<'message.append'>): MessageRow {
  return messageRow({ id: body.id, userId: op.userId, sessionId: op.sessionId, order: body.order ?? op.order, createdAt: body.createdAt, status: body.status, message: body.message });
}

/** Where an appended message sorts: the order its body names (an import's), else the op's. */
function rowOrderOf(op: AppendOp): string {
  return op.body.order ?? op.order;
}

/**
 * Applies message.append ops of the slot's session, as applying them one by
 * one in order would, with one bulkAdd: one append and 100,000 (an import,
 * a batch, a sync pull) take the same path and the same number of
 * IndexedDB round trips. Returns the ops that added a message. Its requests
 * go through `requests`: Dexie's tables, or a native transaction (requests.ts).
 */
export function applyAppends(requests: WriteRequests, slot: SessionSlot, ops: readonly AppendOp[]): Promise<AppendOp[]> {
  // The requests' promises throughout, not an async function: Dexie's transaction zone must survive the
  // early returns (a native await of work that touched no table loses it, and the next request then runs
  // outside the transaction).
  const row = slot.row;
  if (!row) return requests.resolved([]);
  // Ops of an earlier life of this id are dropped (those whose life only the tombstone can place went
  // through applyOp's settling first: see applyOps); ops before a clear or restore that has already been
  // applied are gone for good (but count towards lastOrder, as in applyOp).
  const ofThisLife = ops.filter((op) => sameLife(row, op) !== false);
  for (const op of ofThisLife) touch(slot, row, op);
  const candidates = ofThisLife.filter((op) => rowOrderOf(op) >= row.clearedBefore);
  if (candidates.length === 0) return requests.resolved([]);
  // A message that a message.remove has removed stays removed when a replayed or late append arrives;
  // sessions that never removed one skip the look-up.
  const live = row.removedMessages
    ? requests.meta
        .bulkGet(candidates.map((op) => removedMessageKey(op.userId, op.sessionId, op.body.id)))
        .then((removed) => candidates.filter((_, index) => removed[index] === undefined))
    : requests.resolved(candidates);
  return live.then((adds) => {
    if (adds.length === 0) return [];
    const before = { messageCount: row.messageCount, tokenTotals: { ...row.tokenTotals } };
    // add() refuses an id that is already stored (a replay, or twice in this batch: as in sequence, see
    // settleTies); the others land and the transaction goes on.
    const added = requests.messages.bulkAdd(adds.map((op) => appendedRow(op, op.body)));
    // Handled below, or never awaited when the row write throws at once (a transaction already failing).
    added.catch(() => undefined);
    // The session row goes with the messages, in the same round trip, counted as if every add lands: waiting
    // for the adds first costs one more round trip to IndexedDB per append. A refused add is taken back
    // below, and flushSlot writes the row again; all of it in this transaction, so it lands whole or not at all.
    settle(slot, row, adds);
    const written = requests.sessions.put(row);
    // Handled below, or the transaction is already failing with the adds' error.
    written.catch(() => undefined);
    slot.dirty = false;
    return added.then((refused) => {
      if (refused.size === 0) return written.then(() => adds);
      row.messageCount = before.messageCount;
      row.tokenTotals = before.tokenTotals;
      const landed = settle(slot, row, adds.filter((_, index) => !refused.has(index)));
      slot.dirty = true;
      return settleTies(requests, slot, row, adds.filter((_, index) => refused.has(index))).then((tied) => written.then(() => [...landed, ...tied]));
    });
  });
}

/** message.append, one op at a time (an append whose life only the tombstone could place): the fast path with a run of one. */
export const appendMessage: Rule<'message.append'> = async (db, slot, _row, op) => (await applyAppends(dexieRequests(db), slot, [op])).length > 0;

/** Counts the added messages on the session row. */
function settle(slot: SessionSlot, row: SessionRow, applied: AppendOp[]): AppendOp[] {
  if (applied.length === 0) return applied;
  row.messageCount += applied.length;
  let earliest = rowOrderOf(applied[0] as AppendOp);
  for (const op of applied) if (rowOrderOf(op) < earliest) earliest = rowOrderOf(op);
  invalidateTotals(row, earliest);
  slot.dirty = true;
  return applied;
}

/** How a message row ranks against another copy of it at the same order key: (status rank, the order of what wrote it, its content). */
function copyRank(row: MessageRow): [number, string, string, number] {
  return [STATUS_RANK[row.status], row.updateOrder ?? row.order, JSON.stringify(row.message), row.createdAt];
}

function ranksAbove(a: MessageRow, b: MessageRow): boolean {
  const [x, y] = [copyRank(a), copyRank(b)];
  for (let index = 0; index < x.length; index++) if (x[index] !== y[index]) return (x[index] as number | string) > (y[index] as number | string);
  return false;
}

/**
 * Appends whose id is stored already. Mostly replays; but two appends of one message may also come from
 * two imports (or forks) of one history on two devices, which keep the source's order key: at that same
 * order key the message is, on every replica, the greater of the two copies by {@link copyRank}, with the
 * updates ordered after it folded in (its register), as if the winner had come first. An append at
 * another order key than the stored message's changes nothing (the first stays, as before). Returns the
 * appends that changed a row.
 */
function settleTies(requests: WriteRequests, slot: SessionSlot, row: SessionRow, refused: readonly AppendOp[]): Promise<AppendOp[]> {
  if (refused.length === 0) return requests.resolved([]);
  const keys = refused.map((op) => [op.userId, op.sessionId, op.body.id] as [string, string, string]);
  return requests.messages.bulkGet(keys).then((stored) => {
    const current = new Map<string, MessageRow>();
    stored.forEach((message) => message && current.set(message.id, message));
    const ties = refused.filter((op) => current.get(op.body.id)?.order === rowOrderOf(op));
    if (ties.length === 0) return [];
    return requests.meta.bulkGet(ties.map((op) => messageUpdatesKey(op.userId, op.sessionId, op.body.id))).then((registers) => {
      const changed: AppendOp[] = [];
      const writes: Promise<unknown>[] = [];
      ties.forEach((op, index) => {
        const copy = withLaterUpdates(appendedRow(op, op.body), registers[index]?.value as UpdateRegister | undefined);
        const stays = current.get(op.body.id) as MessageRow;
        if (!ranksAbove(copy, stays)) return;
        const next = messageRow({ ...copy, userId: op.userId, sessionId: op.sessionId });
        current.set(op.body.id, next);
        writes.push(requests.messages.put(next));
        invalidateTotals(row, next.order);
        slot.dirty = true;
        changed.push(op);
      });
      return writes.length === 0 ? changed : Promise.all(writes).then(() => changed);
    });
  });
}
