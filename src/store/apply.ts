/**
 * The one write path: applies ops to the database inside the caller's
 * Dexie transaction (appends also inside a native one: their requests go
 * through requests.ts). Local writes and ops that arrive from sync both come
 * through here. Applying an op twice changes nothing, and replicas that get
 * the same ops in different orders end equal (DESIGN §3.5):
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
 * life only after it has the create). Ops written before lives were named
 * (no `after`) keep the older rules: a create ordered after the tombstone
 * starts a life, ops ordered before the session's create are dropped.
 */
import { formatHlc, hlcOf, parseHlc, subOrder } from '../core/hlc.js';
import { emptyStateFields, SEEN_MAX, type MessageStatus, type Op, type OpBody, type StateFields } from '../core/ops.js';
import { assertNever } from '../core/errors.js';
import { Dexie } from 'dexie';
import { cloneJson, plainEqual, type JsonValue } from '../core/json.js';
import type { Message } from '../core/message.js';
import { sessionRange, sessionTables, type TabulaDb } from './db/schema.js';
import { checkRow, messageRow, type MessageRow, type SessionRow } from './db/rows.js';
import { messageUpdatesKey, messageUpdatesPrefix, removedMessageKey, removedMessagePrefix, tombstoneKey } from './db/keys.js';
import type { KnownRows } from './known-rows.js';
import { dexieRequests, type WriteRequests } from './requests.js';

function wallMs(op: Op): number {
  return parseHlc(hlcOf(op.order)).wallMs;
}

/** Status rank of a message: a final status beats 'streaming', and 'complete' beats 'interrupted'. */
const STATUS_RANK: Record<MessageStatus, number> = { streaming: 0, interrupted: 1, complete: 2 };

/** True when (version, order) a is greater than b. */
function versionWins(version: number, order: string, row: SessionRow): boolean {
  return version > row.version || (version === row.version && order > (row.versionOrder ?? ''));
}

/**
 * The summary is the one the winning save carries (or, for a save without one, the one it kept) unless
 * a clear or restore ordered after the save that wrote it dropped it; `setOrder` is the order of that
 * save. A function of maxima, so every replica computes the same one.
 */
function settleSummary(row: SessionRow, setOrder = row.summaryOrder): void {
  if (row.clearedBefore > setOrder) {
    if (row.state.summary !== null) row.state = { ...row.state, summary: null };
    row.summaryOrder = row.clearedBefore;
  } else {
    row.summaryOrder = setOrder;
  }
}

/** Counts a session's messages (after a clear or restore dropped some). */
function countMessages(db: TabulaDb, userId: string, sessionId: string): Promise<number> {
  return db.messages.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId)).count();
}

/** Drops a session's messages ordered before `order`. */
function dropMessagesBefore(db: TabulaDb, userId: string, sessionId: string, order: string): Promise<number> {
  const [lower] = sessionRange(userId, sessionId);
  return db.messages.where('[userId+sessionId+order]').between(lower, [userId, sessionId, order]).delete();
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
    db.meta.where('key').startsWith(messageUpdatesPrefix(userId, sessionId)).delete(),
  ]);
}

/**
 * Where an op stands among the session's lives, if the row alone can tell: true when it belongs to the
 * row's life, false when a later delete ended its life, undefined when only the tombstone can tell (see
 * {@link enterLife}). Ops that name no life keep the older rule: one ordered before the create is of
 * an earlier life.
 */
function sameLife(row: SessionRow, op: Op): boolean | undefined {
  if (op.after === undefined) return op.order >= row.createdOrder;
  // A row that names its life has the tombstone as its `after` (only a delete moves the tombstone, and it takes the row).
  if (row.after === undefined || op.after > row.after) return undefined;
  return op.after === row.after;
}

/** The session's tombstone: the greatest delete order this replica knows ('' for none). */
export async function tombstoneOf(db: TabulaDb, slot: SessionSlot): Promise<string> {
  if (slot.row?.after !== undefined) return slot.row.after;
  const tombstone = await db.meta.get(tombstoneKey(slot.key[0], slot.key[1]));
  return typeof tombstone?.value === 'string' ? tombstone.value : '';
}

/** Ends the session's life at `order` (its delete, or one an op proves): every row of the session goes and the tombstone moves to `order`. */
async function endLife(db: TabulaDb, slot: SessionSlot, order: string): Promise<void> {
  const [userId, sessionId] = slot.key;
  if (slot.row) {
    await deleteSessionRows(db, userId, sessionId);
    await db.sessions.delete(slot.key);
  }
  await db.meta.put({ key: tombstoneKey(userId, sessionId), value: order });
  slot.row = undefined;
  slot.dirty = false;
}

/** The clock of the order keys an import gives what it copies into a first life (not a real clock: ids from newClientId are hex). */
export const IMPORT_CLOCK = 'import';

/** The order key an import places what it copies into a first life after (`subOrder(IMPORTED, index)`): before anything written in the session. */
export const IMPORTED = formatHlc({ wallMs: 0, counter: 0, clientId: IMPORT_CLOCK });

/**
 * The work of `row`'s life that a delete whose deleter had `seen` drops and never saw (see
 * {@link DroppedWork}); undefined when there is none. Reads the session's rows only when this replica
 * has applied an op the deleter had not: a delete of a session every replica had caught up on reads nothing.
 */
async function unseenWork(db: TabulaDb, row: SessionRow, seen: readonly string[]): Promise<DroppedWork | undefined> {
  const latest = new Map(seen.map((key) => [clockOf(key), key]));
  const unseen = (order: string) => {
    const key = hlcOf(order);
    const known = latest.get(clockOf(key));
    return known === undefined || key > known;
  };
  if (row.seen?.every((key) => !unseen(key))) return undefined;
  const { userId, sessionId } = row;
  const range = sessionRange(userId, sessionId);
  const [messages, memory, notes] = await Promise.all([
    db.messages.where('[userId+sessionId+order]').between(...range).toArray(),
    db.memory.where('[userId+sessionId+scope]').between(...range).toArray(),
    db.notes.where('[userId+sessionId+order]').between(...range).toArray(),
  ]);
  // Rows an import placed by their place in what it copied (at IMPORTED or at the life's own `after`,
  // which no op of the life has for order) are copies: their order key says nothing of who saw them.
  const written = (order: string) => clockOf(order) !== IMPORT_CLOCK && hlcOf(order) !== row.after && unseen(order);
  const work: DroppedWork = {
    userId,
    sessionId,
    messages: messages.filter((m) => written(m.order) || (m.updateOrder !== undefined && unseen(m.updateOrder))).map((m) => m.id),
    memory: memory.filter((m) => !m.deleted && unseen(m.order)).map(({ scope, key }) => ({ scope, key })),
    notes: notes.filter((n) => written(n.order)).map((n) => n.id),
    state: row.version > 0 && row.versionOrder !== undefined && row.versionOrder !== '' && unseen(row.versionOrder),
  };
  return work.messages.length > 0 || work.memory.length > 0 || work.notes.length > 0 || work.state ? work : undefined;
}

/**
 * Settles an op that names its life (`after`) against the session's lives, before the op's own rules
 * apply. A delete ordered after the tombstone ends the life; one at or before it changes nothing (its
 * life, or a later one, has ended already). Any other op whose `after` is past the tombstone proves
 * that delete, which ends the life first. Returns 'dead' for an op of an ended life (dropped),
 * 'deleted' for a delete that ended one, 'live' for an op of the session's current life.
 */
async function enterLife(db: TabulaDb, slot: SessionSlot, op: Op, after: string): Promise<'dead' | 'deleted' | 'live'> {
  const known = slot.row && op.kind !== 'session.delete' ? sameLife(slot.row, op) : undefined;
  if (known !== undefined) return known ? 'live' : 'dead';
  const tombstone = await tombstoneOf(db, slot);
  if (op.kind === 'session.delete') {
    // Whichever life it was written in: every life that began before it has ended, on every replica.
    if (op.order <= tombstone) return 'dead';
    if (slot.dropped && slot.row && op.body.seen) {
      const dropped = await unseenWork(db, slot.row, op.body.seen);
      if (dropped) slot.dropped.push(dropped);
    }
    await endLife(db, slot, op.order);
    return 'deleted';
  }
  if (after < tombstone) return 'dead';
  if (after > tombstone) await endLife(db, slot, after);
  return 'live';
}

function newSessionRow(op: Op & { kind: 'session.create' }): SessionRow {
  // versionOrder and journalCommitted are optional in the row type only for rows written before they existed.
  return {
    userId: op.userId,
    sessionId: op.sessionId,
    ...(op.after === undefined ? {} : { after: op.after }),
    version: 0,
    prefix: { systemPrompt: '', grounding: [], schemaBlock: null },
    prefixOrder: '',
    summaryOrder: '',
    createdOrder: op.order,
    life: op.order,
    clearedBefore: '',
    state: emptyStateFields(),
    messageCount: 0,
    journalCount: 0,
    journalWatermark: 0,
    journalCommitted: 0,
    versionOrder: '',
    createdAt: op.body.createdAt,
    // Every op counts towards updatedAt, the create too (see applyOp), so replicas agree on it.
    updatedAt: Math.max(op.body.createdAt, wallMs(op)),
    lastOrder: op.order,
    forkOf: op.body.forkOf,
    tokenTotals: {},
    // A named life keeps what this replica has of it from its create on, so a delete made here can say so.
    ...(op.after === undefined ? {} : { seen: [hlcOf(op.order)] }),
  };
}

function appendedRow(op: Op, body: OpBody<'message.append'>): MessageRow {
  return messageRow({ id: body.id, userId: op.userId, sessionId: op.sessionId, order: body.order ?? op.order, createdAt: body.createdAt, status: body.status, message: body.message });
}

/** Where an appended message sorts: the order its body names (an import's), else the op's. */
function rowOrderOf(op: AppendOp): string {
  return op.body.order ?? op.order;
}

/** A message's update register (see `messageUpdatesKey`): the latest update of each status. */
type UpdateRegister = Partial<Record<MessageStatus, { order: string; message: Message }>>;

const STATUSES_BY_RANK: readonly MessageStatus[] = ['streaming', 'interrupted', 'complete'];

/** Records a message.update in its message's register, whether or not it changes the row. */
async function registerUpdate(db: TabulaDb, op: Op & { kind: 'message.update' }): Promise<void> {
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
function withLaterUpdates(copy: MessageRow, register: UpdateRegister | undefined): MessageRow {
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
  /** Saves replaced by a save not built on them, found while applying (see {@link SaveConflict}). */
  conflicts?: SaveConflict[];
  /** Work that a delete applied here drops and its deleter never saw (see {@link DroppedWork}). */
  dropped?: DroppedWork[];
}

/**
 * A state save (or restore) replaced by another one that was not built on it: `won` was made on a state
 * other than `lost` (a concurrent save on another replica, of any version). A save that carries its
 * `base` is built on the save whose order key that is (and one that stores the very state it replaces
 * loses nothing, so is not listed); an older one without `base` counts as built on any save of a lower
 * version (the rule before bases, which saw only saves of the same version). The sync client reports it
 * to the device that made `lost`.
 */
export interface SaveConflict {
  readonly userId: string;
  readonly sessionId: string;
  readonly lost: { readonly version: number; readonly order: string; readonly state: StateFields };
  readonly won: { readonly version: number; readonly order: string; readonly state: StateFields };
}

/**
 * What a session.delete that carries `seen` dropped here of the life it ended that its deleter had not
 * seen: work another device did on that life concurrently (offline, say) and that is now gone everywhere.
 * A row counts when the op that last wrote it is ordered after the deleter's greatest key of that op's
 * clock (or its clock is not named at all). Named: the messages (ids, in order; appended or last updated
 * by such an op), the memory keys (set by such an op; a key it deleted is not named), the notes (ids, in
 * order) and whether the state was last saved or restored by such an op. Not named: the prefix, journal
 * entries, checkpoints and the blackboard (a board's changes are not ops: see the report of issue 26).
 * Messages an import or fork copied keep the order keys of what they copy and are judged by those;
 * rows it placed by their place in the copy (its notes and journal entries, messages ordered before the
 * life began) are never named (their source still holds them).
 */
export interface DroppedWork {
  readonly userId: string;
  readonly sessionId: string;
  readonly messages: readonly string[];
  readonly memory: readonly { readonly scope: string; readonly key: string }[];
  readonly notes: readonly string[];
  readonly state: boolean;
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
 * A known session row that a write built on is not the one IndexedDB holds (another tab or sync wrote
 * since): whatever was applied on it must not land; the caller aborts and writes again without it.
 */
export class StaleKnownRow extends Error {}

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

/** The row if it is valid; undefined if not. */
function validRow(key: [string, string], row: SessionRow): SessionRow | undefined {
  try {
    return checkRow('sessions', key, row);
  } catch {
    return undefined;
  }
}

/** A message.append op. */
export type AppendOp = Op & { kind: 'message.append' };

/**
 * Whether an op leaves the browser that made it. A stream's chunks stay local (DESIGN §3.5): its final
 * update carries the order and createdAt its append had, so another replica stores the finished message
 * from it alone, and never holds a streaming message it cannot tell is still alive (its recovery would
 * mark it interrupted, for every device, while the stream goes on).
 */
export function isSynced(op: Op): boolean {
  return (op.kind !== 'message.append' && op.kind !== 'message.update') || op.body.status !== 'streaming';
}

/**
 * Counts an op of this session life towards lastOrder and updatedAt, applied or superseded, so that
 * updatedAt is the same maximum on every replica whatever the order of arrival. Ops that stay local
 * count towards lastOrder only (it keeps this browser's next writes after them).
 */
function touch(slot: SessionSlot, row: SessionRow, op: Op): void {
  // A message an import placed at its source's order key counts too: this browser's next appends follow it.
  const last = op.kind === 'message.append' && op.body.order !== undefined && op.body.order > op.order ? op.body.order : op.order;
  if (last > row.lastOrder) {
    row.lastOrder = last;
    slot.dirty = true;
  }
  if (isSynced(op) && wallMs(op) > row.updatedAt) {
    row.updatedAt = wallMs(op);
    slot.dirty = true;
  }
  if (row.seen && noteSeen(row.seen, op.order)) slot.dirty = true;
}

/** The clock id of an order key (the part after the HLC key's last dot). */
function clockOf(order: string): string {
  const key = hlcOf(order);
  return key.slice(key.lastIndexOf('.') + 1);
}

/**
 * Records op order `order` in a life's `seen` (one greatest key per clock, sorted by clock id); returns
 * true when it moved. Each clock's ops reach a replica in the order it made them (sync delivers each
 * device's ops in order), so a clock's greatest key says that every op of it up to there is here.
 */
function noteSeen(seen: string[], order: string): boolean {
  const key = hlcOf(order);
  const clock = clockOf(key);
  for (let index = 0; index < seen.length; index++) {
    const entry = seen[index] as string;
    const entryClock = clockOf(entry);
    if (entryClock === clock) {
      if (entry >= key) return false;
      seen[index] = key;
      return true;
    }
    if (entryClock > clock) {
      seen.splice(index, 0, key);
      return true;
    }
  }
  seen.push(key);
  return true;
}

/**
 * The body of a session.delete made on `row`: what this replica has of the life it ends (`seen`, the
 * SEEN_MAX most recent clocks), so that a replica holding work of that life this one never saw can name
 * what the delete drops ({@link DroppedWork}). A row of a life named before `seen` existed has none.
 */
export function deleteBody(row: SessionRow | undefined): OpBody<'session.delete'> {
  if (!row?.seen) return {};
  if (row.seen.length <= SEEN_MAX) return { seen: [...row.seen] };
  // Kept by recency: a clock left out counts as unseen, so its work would be named even if it was seen.
  const recent = [...row.seen].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)).slice(0, SEEN_MAX);
  return { seen: recent.sort((a, b) => (clockOf(a) < clockOf(b) ? -1 : 1)) };
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

/**
 * Applies one op to its session's slot. Returns false when the op changed
 * nothing (already applied, superseded, or its session is gone). The
 * session row itself is written by {@link flushSlot}.
 */
export async function applyOp(db: TabulaDb, slot: SessionSlot, op: Op): Promise<boolean> {
  const named = op.after !== undefined;
  if (op.after !== undefined) {
    const life = await enterLife(db, slot, op, op.after);
    if (life !== 'live') return life === 'deleted';
  }
  const existing = slot.row;

  if (op.kind === 'session.create') {
    // A replayed create from before a delete must not bring the session back (enterLife has placed a create that names its life).
    const tombstone = named ? undefined : await db.meta.get(tombstoneKey(op.userId, op.sessionId));
    if (tombstone && typeof tombstone.value === 'string' && op.order <= tombstone.value) return false;
    if (!existing) {
      slot.row = newSessionRow(op);
      slot.dirty = true;
      return true;
    }
    // Two devices may create the same session; its life starts at the earliest create, whose fields it keeps.
    if (op.order === existing.createdOrder) return false;
    // Every create's createdAt counts towards updatedAt, as in newSessionRow, whichever create arrives first.
    if (op.body.createdAt > existing.updatedAt) {
      existing.updatedAt = op.body.createdAt;
      slot.dirty = true;
    }
    if (op.order < existing.createdOrder) {
      existing.createdOrder = op.order;
      existing.createdAt = op.body.createdAt;
      existing.forkOf = op.body.forkOf;
      slot.dirty = true;
      touch(slot, existing, op);
      return true;
    }
  }
  if (!existing) {
    // A delete of a session already gone still moves its tombstone forward, as it would have in order.
    if (op.kind === 'session.delete' && op.order > (await tombstoneOf(db, slot))) await endLife(db, slot, op.order);
    return false;
  }
  // Ops older than the session's creation (a replayed delete, say) belong to an earlier life of this id;
  // an op that names its life has been placed by enterLife (an earlier create of its life may still come).
  if (!named && op.order < existing.createdOrder) return false;
  const row: SessionRow = existing;
  touch(slot, row, op);

  switch (op.kind) {
    case 'session.delete':
      await endLife(db, slot, op.order);
      return true;

    case 'session.create':
      // A later create of a session that exists (made concurrently on another device): only the maxima
      // moved (touch marked the row), nothing a reader sees.
      return false;

    case 'session.clear': {
      if (op.order <= row.clearedBefore) return false;
      // Only messages ordered before the clear go: an append made concurrently on another device survives.
      await dropMessagesBefore(db, op.userId, op.sessionId, op.order);
      row.messageCount = await countMessages(db, op.userId, op.sessionId);
      row.clearedBefore = op.order;
      // The summary goes unless a save ordered after this clear wrote it.
      settleSummary(row);
      row.tokenTotals = {};
      break;
    }

    case 'message.append':
      return (await applyAppends(dexieRequests(db), slot, [op])).length > 0;

    case 'message.update': {
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
        break;
      }
      // An update ordered before the row is about the original of a restored copy, which the restore replaced.
      if (op.order <= current.order) return false;
      // A final status beats 'streaming' and 'complete' beats 'interrupted'; within one status the later update wins.
      const rank = STATUS_RANK[status] - STATUS_RANK[current.status];
      if (rank < 0 || (rank === 0 && op.order <= (current.updateOrder ?? current.order))) return false;
      await db.messages.put(messageRow({ ...current, status, message, updateOrder: op.order }));
      invalidateTotals(row, current.order);
      break;
    }

    case 'prefix.set':
      if (op.order <= row.prefixOrder) return false;
      row.prefix = op.body.prefix;
      row.prefixOrder = op.order;
      break;

    case 'state.save':
      if (!versionWins(op.body.version, op.order, row)) return false;
      // Saves made by the store carry every field, so the winner's state does not depend on which
      // other saves this replica has seen; a partial patch (older data) merges as before.
      setVersion(slot, row, { version: op.body.version, order: op.order, base: op.body.base }, { ...row.state, ...op.body.patch }, 'summary' in op.body.patch);
      break;

    case 'journal.append': {
      // Keyed and placed by the op, or by what its body names (an import's: two imports of one history store its entries once).
      const key = op.body.id ?? op.id;
      const base = op.body.order ?? op.order;
      if (await db.journal.get(`${key}:0`)) return false;
      const committed = row.journalCommitted ?? row.journalWatermark;
      await db.journal.bulkAdd(
        op.body.entries.map((entry, index) => ({
          id: `${key}:${index}`,
          userId: op.userId,
          sessionId: op.sessionId,
          order: subOrder(base, index),
          entry,
        })),
      );
      row.journalCount += op.body.entries.length;
      const through = row.journalThrough;
      if (through !== undefined) {
        // Entries that arrive after the commit that covers them are committed: the commit named their place.
        row.journalWatermark += op.body.entries.filter((_, index) => subOrder(base, index) <= through).length;
        break;
      }
      row.journalCommitted = committed;
      row.journalWatermark = Math.min(committed, row.journalCount);
      break;
    }

    case 'journal.commit': {
      const { through } = op.body;
      if (through !== undefined) {
        // The greatest commit wins: the watermark counts the entries ordered up to the last one it covers, so
        // entries of another device made after it stay pending on every replica, whatever arrives first.
        if (row.journalThrough !== undefined && through <= row.journalThrough) return false;
        row.journalThrough = through;
        const [lower] = sessionRange(op.userId, op.sessionId);
        row.journalWatermark = await db.journal.where('[userId+sessionId+order]').between(lower, [op.userId, op.sessionId, through], true, true).count();
        break;
      }
      // A commit without `through` (older data) counts entries; it is ignored once commits name their entry.
      if (row.journalThrough !== undefined) return false;
      // Remember what was committed even when the entries have not arrived yet; they raise the watermark when they do.
      const committed = Math.max(row.journalCommitted ?? row.journalWatermark, op.body.watermark);
      if (committed === row.journalCommitted) return false;
      row.journalCommitted = committed;
      row.journalWatermark = Math.min(committed, row.journalCount);
      break;
    }

    case 'note.add': {
      const { id = op.id, order = op.order, text, runId, scope, at } = op.body;
      const current = await db.notes.get(id);
      const note = { id, userId: op.userId, sessionId: op.sessionId, order, text, runId, scope, at };
      if (current) {
        // The same note added twice (two imports of one history, which name its id): it sorts where the
        // first in order puts it, whichever arrives first. A replay, or a note of another session, changes nothing.
        if (current.userId !== op.userId || current.sessionId !== op.sessionId || order >= current.order) return false;
        await db.notes.put(note);
        break;
      }
      await db.notes.add(note);
      break;
    }

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
            const original = originals[position];
            // Rows written before update registers existed carry their last update themselves.
            const carried = original?.updateOrder === undefined || original.updateOrder <= op.order ? copy : { ...copy, status: original.status, message: original.message, updateOrder: original.updateOrder };
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
      break;
    }

    case 'message.remove':
      if (!(await removeMessage(db, row, op))) return false;
      break;

    default:
      assertNever(op, 'op kind');
  }

  slot.dirty = true;
  return true;
}

/**
 * Makes the save (version, order) the session's winning state, reporting the save it replaces when it
 * was not built on that one (see {@link SaveConflict}): with a `base`, built on exactly the save whose
 * order key it names; without (older ops), on any save of a lower version.
 */
function setVersion(
  slot: SessionSlot,
  row: SessionRow,
  save: { version: number; order: string; base: string | undefined },
  state: StateFields,
  setsSummary: boolean,
): void {
  const { version, order, base } = save;
  const current = row.versionOrder ?? '';
  // A save that names its base and stores the very state it replaces loses nothing (two imports of one history, say).
  const conflict = base === undefined ? version === row.version : base !== current && !plainEqual(row.state, state);
  if (slot.conflicts && row.version > 0 && conflict) {
    slot.conflicts.push({
      userId: row.userId,
      sessionId: row.sessionId,
      lost: { version: row.version, order: current, state: row.state },
      won: { version, order, state },
    });
  }
  row.state = state;
  row.version = version;
  row.versionOrder = order;
  if (base === undefined) delete row.versionBase;
  else row.versionBase = base;
  settleSummary(row, setsSummary ? order : row.summaryOrder);
}
