/**
 * The batch slot: a session's row held in memory while a batch of ops is
 * applied, how it is loaded (read and validated, or guessed from a known row
 * and checked), written back, and emptied when the session's life ends (its
 * rows go and the tombstone moves). Also the shape every convergence rule
 * takes ({@link Rule}). What the ops mean is the rule modules'; this module
 * knows only the row and the session's stored rows as a whole.
 */
import { cloneJson, plainEqual, type JsonValue } from '../../core/json.js';
import type { Op } from '../../core/ops.js';
import { checkRow, type SessionRow } from '../db/rows.js';
import { messageUpdatesPrefix, removedMessagePrefix, tombstoneKey } from '../db/keys.js';
import { sessionRange, type TabulaDb } from '../db/schema.js';
import type { WriteRequests } from '../requests.js';
import type { DroppedWork } from './lives.js';
import type { SaveConflict } from './state.js';

/**
 * A session row held in memory while a batch of ops is applied, written
 * back once by {@link flushSlot}: a batch of 5,000 appends reads and
 * writes the session row once, not 5,000 times.
 */
export interface SessionSlot {
  readonly key: [string, string];
  row: SessionRow | undefined;
  dirty: boolean;
  /** Saves replaced by a save not built on them, found while applying (see {@link SaveConflict}). */
  conflicts?: SaveConflict[];
  /** Work that a delete applied here drops and its deleter never saw (see {@link DroppedWork}). */
  dropped?: DroppedWork[];
}

/** An op of one kind. */
export type OpOf<K extends Op['kind']> = Op & { kind: K };

/**
 * The convergence rule of one op kind (see the contract in index.ts): applies `op` to the session's
 * `row`, held in `slot`, and returns (or resolves) true when it changed something (false: already
 * applied, or superseded). A rule that changed something marks the slot dirty ({@link changed}) unless it wrote the
 * row itself; the row is written back by {@link flushSlot}.
 */
export type Rule<K extends Op['kind']> = (db: TabulaDb, slot: SessionSlot, row: SessionRow, op: OpOf<K>) => boolean | Promise<boolean>;

/** What a rule returns when its op changed something: marks the slot's row to be written back, and true. */
export function changed(slot: SessionSlot): true {
  slot.dirty = true;
  return true;
}

/**
 * Loads the slot of op's session (inside the caller's transaction). A corrupt row is refused by name
 * (`schema/invalid`): every op builds on it, and a local write or a sync pull must not fail on it with a
 * raw TypeError, or write a row built on junk.
 */
export async function loadSlot(db: TabulaDb, userId: string, sessionId: string): Promise<SessionSlot> {
  const key: [string, string] = [userId, sessionId];
  const row = await db.sessions.get(key);
  return { key, row: row && checkRow('sessions', key, row), dirty: false };
}

/** Writes the slot's row back if an op changed it. */
export async function flushSlot(requests: WriteRequests, slot: SessionSlot): Promise<void> {
  if (slot.dirty && slot.row) await requests.sessions.put(slot.row);
  slot.dirty = false;
}

/**
 * A known session row that a write built on is not the one IndexedDB holds (another tab or sync wrote
 * since): whatever was applied on it must not land; the caller aborts and writes again without it.
 */
export class StaleKnownRow extends Error {}

/**
 * The slot of a session whose row is known: the row is not waited for, its read only checks the guess
 * (IndexedDB runs a transaction's requests in order, so this read sees the row as committed before
 * anything this transaction writes). Writes built on it go out at once: one round trip less. The check
 * goes into `checks`, for {@link knownRowsHeld}.
 *
 * The check is equality with the known row, nothing less: any change another tab or sync made to any
 * field fails it. A known row is valid (see known-rows.ts), so a stored row equal to it is valid too: the
 * check is the read's validation, and a stored row that is corrupt fails it (the write made again from
 * the stored row then refuses it). The slot gets a copy, for the ops to change: the check compares with
 * `known` when the read arrives, after they have.
 */
export function knownSlot(requests: WriteRequests, key: [string, string], known: SessionRow, checks: Promise<boolean>[]): SessionSlot {
  const check = requests.sessions.get(key).then((row) => row !== undefined && plainEqual(row, known));
  // Awaited once the write is built, unless building fails first (then only its outcome is asked).
  check.catch(() => undefined);
  checks.push(check);
  // A valid row is JSON data (its optional fields may be undefined, which the copy keeps).
  return { key, row: cloneJson(known as unknown as JsonValue) as unknown as SessionRow, dirty: false };
}

/**
 * Throws {@link StaleKnownRow} when some known row a check was made for is not the stored one. Called
 * also when building the write failed: the error may be the guess's, so only the stored row can tell.
 */
export async function knownRowsHeld(checks: readonly Promise<boolean>[]): Promise<void> {
  for (const check of checks) if (!(await check.catch(() => false))) throw new StaleKnownRow();
}

/** The row if it is valid; undefined if not (only a valid row may become known: see known-rows.ts). */
export function validRow(key: [string, string], row: SessionRow): SessionRow | undefined {
  try {
    return checkRow('sessions', key, row);
  } catch {
    return undefined;
  }
}

/** The session's tombstone: the greatest delete order this replica knows ('' for none). */
export async function tombstoneOf(db: TabulaDb, slot: SessionSlot): Promise<string> {
  if (slot.row?.after !== undefined) return slot.row.after;
  const tombstone = await db.meta.get(tombstoneKey(slot.key[0], slot.key[1]));
  return typeof tombstone?.value === 'string' ? tombstone.value : '';
}

/** Ends the session's life at `order` (its delete, or one an op proves): every row of the session goes and the tombstone moves to `order`. */
export async function endLife(db: TabulaDb, slot: SessionSlot, order: string): Promise<void> {
  const [userId, sessionId] = slot.key;
  if (slot.row) {
    await deleteSessionRows(db, userId, sessionId);
    await db.sessions.delete(slot.key);
  }
  await db.meta.put({ key: tombstoneKey(userId, sessionId), value: order });
  slot.row = undefined;
  slot.dirty = false;
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
    db.meta.where('key').startsWith(messageUpdatesPrefix(userId, sessionId)).delete(),
  ]);
}
