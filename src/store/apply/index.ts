/**
 * The one write path: applies ops to the database inside the caller's
 * Dexie transaction (appends also inside a native one: their requests go
 * through requests.ts). Local writes and ops that arrive from sync both come
 * through here. Applying an op twice changes nothing, and replicas that get
 * the same ops in different orders end equal (architecture.md, Convergence):
 * - rows created by an op are keyed by ids the op carries;
 * - last-write-wins fields (prefix, memory keys) keep the greatest order;
 * - state saves and restores carry the whole state and the version they
 *   produce; the greatest (version, order) wins; each names the save it was
 *   built on (`base`), and one that replaces a save it was not built on is
 *   reported (SaveConflict), whatever the two versions;
 * - a message's status and text keep the greatest (status rank, order), and
 *   an update that arrives before its append stores the message itself; two
 *   appends of one id at one order key (two imports of one history) keep the
 *   greater copy;
 * - clears and restores drop the messages ordered before them; a restored
 *   copy takes the updates of its message ordered after the restore, kept
 *   per message id in an update register even when they arrived first, and
 *   a message removed by a remove ordered after the restore is not restored
 *   (the remove's tombstone stays, whichever arrives first);
 * - a checkpoint too large for one op comes as its head and parts, each
 *   placing its messages by position; it is listed and restorable once
 *   every position has its message, a part applied twice adds nothing, and
 *   a restore that comes before the checkpoint is whole waits with it and
 *   is applied when the last part comes (as if it had come then);
 * - a note or journal entry named by its op (an import's) is stored once:
 *   a note where the first in order puts it;
 * - a journal commit names the last entry it covers; the watermark counts
 *   the entries up to the greatest one named, so a commit may arrive before
 *   its entries and another device's later entries stay pending.
 * - session lives: every op names the life it was written in (`after`, the
 *   order of the delete that life began after). The session's tombstone T
 *   is the greatest delete order known; a delete ordered after T ends the
 *   life and moves T, and an op whose `after` is past T proves such a
 *   delete exists, so it is applied first. Ops of a life before T are
 *   dropped. The session is then a function of the greatest delete and the
 *   ops of the life after it, whatever order they came in. A delete says
 *   what its replica had of the life (`seen`), so a replica that drops work
 *   of that life the deleter never saw can name it (DroppedWork).
 * A session.create must still reach a replica before the ops made after it
 * (sync delivers each device's ops in order, and another device writes to a
 * life only after it has the create), and a checkpoint's head before its
 * parts (they come from one device's one write, in order). Ops written before lives were named
 * (no `after`) keep the older rules: a create ordered after the tombstone
 * starts a life, ops ordered before the session's create are dropped.
 *
 * This module is the batch driver: it groups ops by session into slots
 * (slot.ts), settles each op's life (lives.ts; legacy.ts for ops that name
 * none), and hands it to its kind's rule (the table below), or a run of
 * appends to the fast path (appends.ts). The rules live by concern:
 * messages.ts, state.ts, journal.ts, checkpoints.ts, memory-notes.ts; what
 * exists only for older data is legacy.ts.
 */
import { Dexie } from 'dexie';
import { assertNever } from '../../core/errors.js';
import type { Op } from '../../core/ops.js';
import { sessionTables, type TabulaDb } from '../db/schema.js';
import { type SessionRow } from '../db/rows.js';
import type { KnownRows } from '../known-rows.js';
import { dexieRequests } from '../requests.js';
import { appendMessage, applyAppends, type AppendOp } from './appends.js';
import { addCheckpointPart, createCheckpoint, restoreCheckpoint } from './checkpoints.js';
import { appendJournal, commitJournal } from './journal.js';
import * as legacy from './legacy.js';
import { createSession, enterLife, sameLife, touch, type DroppedWork } from './lives.js';
import { addNote, setMemory } from './memory-notes.js';
import { clearSession, removeMessage, updateMessage } from './messages.js';
import { flushSlot, knownRowsHeld, knownSlot, loadSlot, validRow, type Rule, type SessionSlot } from './slot.js';
import { saveState, setPrefix, type SaveConflict } from './state.js';

// What the rest of the store uses, re-exported so that its importers name one module.
export { applyAppends, type AppendOp } from './appends.js';
export { deleteBody, IMPORT_CLOCK, IMPORTED, type DroppedWork } from './lives.js';
export { isSynced } from './messages.js';
export { flushSlot, knownRowsHeld, knownSlot, loadSlot, StaleKnownRow, tombstoneOf, type SessionSlot } from './slot.js';
export type { SaveConflict } from './state.js';

/** What {@link applyOps} takes besides the ops. */
export interface ApplyOptions {
  /** Receives the saves replaced by a save not built on them (see {@link SaveConflict}). */
  readonly conflicts?: SaveConflict[];
  /** Receives what deletes dropped that their deleters had not seen (see {@link DroppedWork}). */
  readonly dropped?: DroppedWork[];
  /**
   * Session rows to build on without waiting for their read (see known-rows.ts). Each one used is
   * checked against the stored row in the same transaction, read before any write to it; when they
   * differ, applyOps rejects with {@link StaleKnownRow} and the caller's transaction must abort.
   */
  readonly known?: KnownRows;
  /** Filled with every session's row as the ops leave it (undefined: the session is gone), to remember once the transaction commits. */
  readonly settled?: { userId: string; sessionId: string; row: SessionRow | undefined }[];
}

/**
 * Applies ops in order, inside the caller's readwrite transaction over
 * every table of the sessions (see `sessionTables`), and returns those
 * that changed something. This is the entry point for remote ops. A run of
 * consecutive appends to one session is applied as one batch
 * ({@link applyAppends}), as if one by one.
 */
export function applyOps(db: TabulaDb, ops: readonly Op[], options: ApplyOptions = {}): Promise<Op[]> {
  if (ops.length === 0) return Dexie.Promise.resolve([]);
  // A scope of its own within the caller's transaction, and an async one: Dexie follows native awaits
  // only inside a scope function that is itself async, and the caller's may not be (`() => applyOps(…)`
  // would lose the transaction at the first await of a promise that touched no table).
  return db.transaction('rw', sessionTables(db), async () => applyInOrder(db, ops, options));
}

async function applyInOrder(db: TabulaDb, ops: readonly Op[], options: ApplyOptions): Promise<Op[]> {
  const { conflicts, dropped, known, settled } = options;
  const requests = dexieRequests(db);
  const slots = new Map<string, SessionSlot>();
  const checks: Promise<boolean>[] = [];
  const applied: Op[] = [];
  try {
    for (let i = 0; i < ops.length; ) {
      const op = ops[i] as Op;
      const id = JSON.stringify([op.userId, op.sessionId]);
      let slot = slots.get(id);
      if (!slot) {
        const row = known?.get(op.userId, op.sessionId);
        slot = row ? knownSlot(requests, [op.userId, op.sessionId], row, checks) : await loadSlot(db, op.userId, op.sessionId);
        slots.set(id, slot);
      }
      if (conflicts) slot.conflicts = conflicts;
      if (dropped) slot.dropped = dropped;
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
      const row = slot.row;
      // Without a row, an append that names its life may still prove a delete (see enterLife), as any op does.
      if (row ? run.every((append) => sameLife(row, append) !== undefined) : run.every((append) => append.after === undefined)) {
        applied.push(...(await applyAppends(requests, slot, run)));
        continue;
      }
      // Some append names a life only the tombstone can place (a delete this replica has not seen yet, say): one by one.
      for (const append of run) if (await applyOp(db, slot, append)) applied.push(append);
    }
    for (const slot of slots.values()) await flushSlot(requests, slot);
  } catch (error) {
    await knownRowsHeld(checks);
    throw error;
  }
  await knownRowsHeld(checks);
  // Only a valid row may become known (see known-rows.ts): a row this batch built is checked too.
  if (settled) for (const slot of slots.values()) settled.push({ userId: slot.key[0], sessionId: slot.key[1], row: slot.row && validRow(slot.key, slot.row) });
  return applied;
}

/** The kinds whose rule applies to a session row (a create makes one: {@link createSession}). */
type RowKind = Exclude<Op['kind'], 'session.create'>;

/** The convergence rule of each op kind, in the module of its concern. */
const RULES: { readonly [K in RowKind]: Rule<K> } = {
  'session.delete': legacy.endUnnamedLife,
  'session.clear': clearSession,
  'message.append': appendMessage,
  'message.update': updateMessage,
  'message.remove': removeMessage,
  'prefix.set': setPrefix,
  'state.save': saveState,
  'journal.append': appendJournal,
  'journal.commit': commitJournal,
  'note.add': addNote,
  'memory.set': setMemory,
  'memory.delete': setMemory,
  'checkpoint.create': createCheckpoint,
  'checkpoint.part': addCheckpointPart,
  'checkpoint.restore': restoreCheckpoint,
};

/**
 * Applies one op to its session's slot. Returns false when the op changed
 * nothing (already applied, superseded, or its session is gone). The
 * session row itself is written by {@link flushSlot}.
 */
export async function applyOp(db: TabulaDb, slot: SessionSlot, op: Op): Promise<boolean> {
  const life = op.after === undefined ? await legacy.placeUnnamed(db, slot, op) : await enterLife(db, slot, op, op.after);
  if (life !== 'live') return life === 'deleted';
  if (op.kind === 'session.create') return createSession(slot, op);
  const row = slot.row;
  // An op of a life whose create has not reached this replica, or of a session that is gone.
  if (!row) return false;
  touch(slot, row, op);
  // An op from outside the type system (a test's, a tab's of another version) may name a kind no rule has:
  // refused by name, as an exhaustive switch would, not with a TypeError (or a rule from Object.prototype).
  if (!Object.hasOwn(RULES, op.kind)) assertNever(op as never, 'op kind');
  // The table holds each kind's rule: the lookup by the op's own kind is what TypeScript cannot follow.
  return (RULES[op.kind] as Rule<RowKind>)(db, slot, row, op);
}
