/**
 * The one write path: applies ops to the database inside the caller's
 * Dexie transaction. Local writes and ops that arrive from sync both come
 * through here, and applying an op twice changes nothing:
 * - rows created by an op are keyed by ids the op carries;
 * - last-write-wins fields (prefix, memory keys) keep the greatest order;
 * - state saves and restores carry the version they produce, applied only
 *   over an older version.
 */
import { hlcOf, parseHlc, subOrder } from '../core/hlc.js';
import { emptyStateFields, type Op, type OpBody } from '../core/ops.js';
import { assertNever } from '../core/errors.js';
import { Dexie } from 'dexie';
import { removedMessageKey, removedMessagePrefix, sessionRange, tombstoneKey, type MessageRow, type SessionRow, type TabulaDb } from './schema.js';

function wallMs(op: Op): number {
  return parseHlc(hlcOf(op.order)).wallMs;
}

/** Drops cached token totals that cover a message at `order` (it changed, or arrived out of order). */
function invalidateTotals(row: SessionRow, order: string): void {
  for (const [counter, totals] of Object.entries(row.tokenTotals)) {
    if (order <= totals.upTo) delete row.tokenTotals[counter];
  }
}

async function deleteSessionRows(db: TabulaDb, userId: string, sessionId: string): Promise<void> {
  const [lower, upper] = sessionRange(userId, sessionId);
  await Promise.all([
    db.messages.where('[userId+sessionId+order]').between(lower, upper).delete(),
    db.journal.where('[userId+sessionId+order]').between(lower, upper).delete(),
    db.notes.where('[userId+sessionId+order]').between(lower, upper).delete(),
    db.memory.where('[userId+sessionId+scope]').between(lower, upper).delete(),
    db.runs.where('[userId+sessionId+scope]').between(lower, upper).delete(),
    db.checkpoints.where('[userId+sessionId]').equals([userId, sessionId]).delete(),
    db.meta.where('key').startsWith(removedMessagePrefix(userId, sessionId)).delete(),
  ]);
}

function newSessionRow(op: Op & { kind: 'session.create' }): SessionRow {
  return {
    userId: op.userId,
    sessionId: op.sessionId,
    version: 0,
    prefix: { systemPrompt: '', grounding: [], schemaBlock: null },
    prefixOrder: '',
    summaryOrder: '',
    createdOrder: op.order,
    clearedBefore: '',
    state: emptyStateFields(),
    messageCount: 0,
    journalCount: 0,
    journalWatermark: 0,
    createdAt: op.body.createdAt,
    updatedAt: op.body.createdAt,
    lastOrder: op.order,
    forkOf: op.body.forkOf,
    tokenTotals: {},
  };
}

function messageRow(op: Op, body: OpBody<'message.append'>): MessageRow {
  return {
    id: body.id,
    userId: op.userId,
    sessionId: op.sessionId,
    order: op.order,
    createdAt: body.createdAt,
    status: body.status,
    message: body.message,
    tokens: {},
  };
}

/**
 * Removes a message and leaves a tombstone, in either arrival order: a
 * remove applied before its append (sync delivers out of order) still
 * keeps that append out. The tombstone is recorded whatever the order, so
 * replicas converge; returns false when the op changed nothing (a replay).
 */
async function removeMessage(db: TabulaDb, row: SessionRow, op: Op & { kind: 'message.remove' }): Promise<boolean> {
  const key = removedMessageKey(op.userId, op.sessionId, op.body.id);
  const [tombstone, current] = await Promise.all([db.meta.get(key), db.messages.get([op.userId, op.sessionId, op.body.id])]);
  let changed = false;
  if (!tombstone) row.removedMessages = (row.removedMessages ?? 0) + 1;
  if (!tombstone || (typeof tombstone.value === 'string' && op.order > tombstone.value)) {
    await db.meta.put({ key, value: op.order });
    changed = true;
  }
  // A remove ordered before a clear or restore leaves the messages those put back (a restored copy stays).
  if (current && op.order >= row.clearedBefore) {
    await db.messages.delete([op.userId, op.sessionId, op.body.id]);
    row.messageCount -= 1;
    invalidateTotals(row, current.order);
    changed = true;
  }
  return changed;
}

/**
 * A session row held in memory while a batch of ops is applied, written
 * back once by {@link flushSlot}: a batch of 5,000 appends reads and
 * writes the session row once, not 5,000 times.
 */
export interface SessionSlot {
  readonly key: [string, string];
  row: SessionRow | undefined;
  dirty: boolean;
}

/** Loads the slot of op's session (inside the caller's transaction). */
export async function loadSlot(db: TabulaDb, userId: string, sessionId: string): Promise<SessionSlot> {
  const key: [string, string] = [userId, sessionId];
  return { key, row: await db.sessions.get(key), dirty: false };
}

/** Writes the slot's row back if an op changed it. */
export async function flushSlot(db: TabulaDb, slot: SessionSlot): Promise<void> {
  if (slot.dirty && slot.row) await db.sessions.put(slot.row);
  slot.dirty = false;
}

/**
 * Applies ops in order, inside the caller's readwrite transaction over
 * every table of the sessions (see `sessionTables`), and returns those
 * that changed something. This is the entry point for remote ops. A run of
 * consecutive appends to one session is applied as one batch
 * ({@link applyAppends}), as if one by one.
 */
export async function applyOps(db: TabulaDb, ops: readonly Op[]): Promise<Op[]> {
  const slots = new Map<string, SessionSlot>();
  const applied: Op[] = [];
  for (let i = 0; i < ops.length; ) {
    const op = ops[i] as Op;
    const id = JSON.stringify([op.userId, op.sessionId]);
    let slot = slots.get(id);
    if (!slot) slots.set(id, (slot = await loadSlot(db, op.userId, op.sessionId)));
    if (op.kind !== 'message.append') {
      if (await applyOp(db, slot, op)) applied.push(op);
      i += 1;
      continue;
    }
    const run: AppendOp[] = [];
    for (; i < ops.length; i++) {
      const next = ops[i] as Op;
      if (next.kind !== 'message.append' || next.userId !== op.userId || next.sessionId !== op.sessionId) break;
      run.push(next);
    }
    applied.push(...(await applyAppends(db, slot, run)));
  }
  for (const slot of slots.values()) await flushSlot(db, slot);
  return applied;
}

/** A message.append op. */
export type AppendOp = Op & { kind: 'message.append' };

/** Marks ops applied to the session row: their order, their time, the slot dirty. */
function touch(slot: SessionSlot, row: SessionRow, op: Op): void {
  if (op.order > row.lastOrder) row.lastOrder = op.order;
  row.updatedAt = Math.max(row.updatedAt, wallMs(op));
  slot.dirty = true;
}

/**
 * Applies message.append ops of the slot's session, as applying them one by
 * one in order would, with one bulkAdd: one append and 100,000 (an import,
 * a batch, a sync pull) take the same path and the same number of
 * IndexedDB round trips. Returns the ops that added a message.
 */
export function applyAppends(db: TabulaDb, slot: SessionSlot, ops: readonly AppendOp[]): Promise<AppendOp[]> {
  // Dexie promises throughout, not an async function: the transaction's zone must survive the early
  // returns (a native await of work that touched no table loses it, and the next request then runs
  // outside the transaction).
  const row = slot.row;
  // Ops older than the session's creation belong to an earlier life of this id; ops before a clear or
  // restore that has already been applied are gone for good.
  const candidates = row ? ops.filter((op) => op.order >= row.createdOrder && op.order >= row.clearedBefore) : [];
  if (!row || candidates.length === 0) return Dexie.Promise.resolve([]);
  // A message that a message.remove has removed stays removed when a replayed or late append arrives;
  // sessions that never removed one skip the look-up.
  const live = row.removedMessages
    ? db.meta
        .bulkGet(candidates.map((op) => removedMessageKey(op.userId, op.sessionId, op.body.id)))
        .then((removed) => candidates.filter((_, index) => removed[index] === undefined))
    : Dexie.Promise.resolve(candidates);
  return live.then((adds) => {
    if (adds.length === 0) return [];
    // add() refuses an id that is already stored (a replay, or twice in this batch: the first wins, as
    // in sequence); Dexie keeps the transaction alive when the BulkError is caught.
    return db.messages.bulkAdd(adds.map((op) => messageRow(op, op.body))).then(
      () => settle(slot, row, adds),
      (error: unknown) => {
        if (!(error instanceof Dexie.BulkError)) throw error;
        const refused = new Set<number>();
        for (const [position, failure] of Object.entries(error.failuresByPos)) {
          if (failure.name !== 'ConstraintError') throw error;
          refused.add(Number(position));
        }
        return settle(slot, row, adds.filter((_, index) => !refused.has(index)));
      },
    );
  });
}

/** Counts the added messages on the session row. */
function settle(slot: SessionSlot, row: SessionRow, applied: AppendOp[]): AppendOp[] {
  if (applied.length === 0) return applied;
  row.messageCount += applied.length;
  let earliest = (applied[0] as AppendOp).order;
  for (const op of applied) {
    if (op.order < earliest) earliest = op.order;
    touch(slot, row, op);
  }
  invalidateTotals(row, earliest);
  return applied;
}

/**
 * Applies one op to its session's slot. Returns false when the op changed
 * nothing (already applied, superseded, or its session is gone). The
 * session row itself is written by {@link flushSlot}.
 */
export async function applyOp(db: TabulaDb, slot: SessionSlot, op: Op): Promise<boolean> {
  const existing = slot.row;

  if (op.kind === 'session.create') {
    // A replayed create from before a delete must not bring the session back.
    const tombstone = await db.meta.get(tombstoneKey(op.userId, op.sessionId));
    if (tombstone && typeof tombstone.value === 'string' && op.order <= tombstone.value) return false;
    if (!existing) {
      slot.row = newSessionRow(op);
      slot.dirty = true;
      return true;
    }
    // Two devices may create the same session; its life starts at the earliest create.
    if (op.order >= existing.createdOrder) return false;
    existing.createdOrder = op.order;
    slot.dirty = true;
    return true;
  }
  if (!existing) return false;
  // Ops older than the session's creation (a replayed delete, say) belong to an earlier life of this id.
  if (op.order < existing.createdOrder) return false;
  const row: SessionRow = existing;

  switch (op.kind) {
    case 'session.delete':
      await deleteSessionRows(db, op.userId, op.sessionId);
      await db.sessions.delete(slot.key);
      await db.meta.put({ key: tombstoneKey(op.userId, op.sessionId), value: op.order });
      slot.row = undefined;
      slot.dirty = false;
      return true;

    case 'session.clear': {
      const [lower] = sessionRange(op.userId, op.sessionId);
      // Only messages ordered before the clear go: an append made concurrently on another device survives.
      await db.messages.where('[userId+sessionId+order]').between(lower, [op.userId, op.sessionId, op.order]).delete();
      row.messageCount = await db.messages.where('[userId+sessionId+order]').between(...sessionRange(op.userId, op.sessionId)).count();
      if (op.order > row.clearedBefore) row.clearedBefore = op.order;
      // The summary goes only if nothing wrote it after this clear (a replayed clear must not undo a later save).
      if (op.order > row.summaryOrder) {
        row.state = { ...row.state, summary: null };
        row.summaryOrder = op.order;
      }
      row.tokenTotals = {};
      break;
    }

    case 'message.append':
      return (await applyAppends(db, slot, [op])).length > 0;

    case 'message.update': {
      const current = await db.messages.get([op.userId, op.sessionId, op.body.id]);
      if (!current) return false;
      // Only a streaming message changes; 'complete' and 'interrupted' are final, whatever arrives late.
      if (current.status !== 'streaming') return false;
      await db.messages.put({ ...current, status: op.body.status, message: op.body.message, tokens: {} });
      invalidateTotals(row, current.order);
      break;
    }

    case 'prefix.set':
      if (op.order <= row.prefixOrder) return false;
      row.prefix = op.body.prefix;
      row.prefixOrder = op.order;
      break;

    case 'state.save':
      if (op.body.version <= row.version) return false;
      row.state = { ...row.state, ...op.body.patch };
      row.version = op.body.version;
      if (op.body.patch.summary !== undefined && op.order > row.summaryOrder) row.summaryOrder = op.order;
      break;

    case 'journal.append': {
      if (await db.journal.get(`${op.id}:0`)) return false;
      await db.journal.bulkAdd(
        op.body.entries.map((entry, index) => ({
          id: `${op.id}:${index}`,
          userId: op.userId,
          sessionId: op.sessionId,
          order: subOrder(op.order, index),
          entry,
        })),
      );
      row.journalCount += op.body.entries.length;
      break;
    }

    case 'journal.commit': {
      const watermark = Math.max(row.journalWatermark, Math.min(op.body.watermark, row.journalCount));
      if (watermark === row.journalWatermark) return false;
      row.journalWatermark = watermark;
      break;
    }

    case 'note.add':
      if (await db.notes.get(op.id)) return false;
      await db.notes.add({ id: op.id, userId: op.userId, sessionId: op.sessionId, order: op.order, ...op.body });
      break;

    case 'memory.set':
    case 'memory.delete': {
      const memoryKey: [string, string, string, string] = [op.userId, op.sessionId, op.body.scope, op.body.key];
      const current = await db.memory.get(memoryKey);
      if (current && op.order <= current.order) return false;
      const deleted = op.kind === 'memory.delete';
      await db.memory.put({
        userId: op.userId,
        sessionId: op.sessionId,
        scope: op.body.scope,
        key: op.body.key,
        value: deleted ? null : op.body.value,
        deleted,
        order: op.order,
      });
      break;
    }

    case 'checkpoint.create':
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
      break;

    case 'checkpoint.restore': {
      if (op.body.version <= row.version) return false;
      const checkpoint = await db.checkpoints.get(op.body.id);
      if (!checkpoint || checkpoint.userId !== op.userId || checkpoint.sessionId !== op.sessionId) return false;
      const { snapshot } = checkpoint;
      await db.messages.where('[userId+sessionId+order]').between(...sessionRange(op.userId, op.sessionId)).delete();
      // Restored messages take order keys derived from the restore, so they sort as of now: a clear
      // replayed later (ordered before the restore) cannot drop them, and appends still follow them.
      await db.messages.bulkAdd(
        snapshot.messages.map((m, index) => ({ ...m, order: subOrder(op.order, index), userId: op.userId, sessionId: op.sessionId, tokens: {} })),
      );
      row.prefix = snapshot.prefix;
      row.prefixOrder = op.order;
      row.summaryOrder = op.order;
      if (op.order > row.clearedBefore) row.clearedBefore = op.order;
      row.state = snapshot.state;
      row.version = op.body.version;
      row.messageCount = snapshot.messages.length;
      row.tokenTotals = {};
      break;
    }

    case 'message.remove':
      if (!(await removeMessage(db, row, op))) return false;
      break;

    default:
      assertNever(op, 'op kind');
  }

  touch(slot, row, op);
  return true;
}
