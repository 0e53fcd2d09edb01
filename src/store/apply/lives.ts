/**
 * Session lives (see "session lives" in index.ts): which life of a session
 * id an op belongs to, a delete that ends the life (and the work it drops
 * that its deleter never saw, {@link DroppedWork}), a create that starts
 * one, and what each life has seen (`seen`, one greatest order key per
 * clock) and counts towards its maxima (`touch`). Ops that name no life
 * (written before lives were named) are placed by legacy.ts; the slot's
 * tombstone and ending a life's rows are slot.ts's.
 */
import { formatHlc, hlcOf, parseHlc } from '../../core/hlc.js';
import { emptyStateFields, SEEN_MAX, type Op, type OpBody } from '../../core/ops.js';
import { sessionRange, type TabulaDb } from '../db/schema.js';
import { lifeOf, type SessionRow } from '../db/rows.js';
import * as legacy from './legacy.js';
import { isSynced } from './messages.js';
import { endLife, tombstoneOf, type OpOf, type SessionSlot } from './slot.js';

function wallMs(op: Op): number {
  return parseHlc(hlcOf(op.order)).wallMs;
}

/**
 * What a session.delete that carries `seen` dropped here of the life it ended that its deleter had not
 * seen: work another device did on that life concurrently (offline, say) and that is now gone everywhere.
 * A row counts when the op that last wrote it is ordered after the deleter's greatest key of that op's
 * clock (or its clock is not named at all). Named: the messages (ids, in order; appended or last updated
 * by such an op), the memory keys (set by such an op; a key it deleted is not named), the notes (ids, in
 * order) and whether the state was last saved or restored by such an op. Not named: the prefix, journal
 * entries and checkpoints. The blackboard's changes are not ops, and its doc is in a database of its own,
 * outside the transaction that applies the delete: a delete that says what its deleter had of the board
 * (`board`) leaves `board` here, for the board of the ended life to be compared once the transaction has
 * committed and before that board is deleted (replication/pages.ts, `BoardRegistry.unseenKeys`).
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
  /** The board to compare: this replica's name of the life that ended (`lifeOf` its row) and the deleter's `board`. */
  readonly board?: { readonly life: string; readonly seen: string };
}

/** The clock of the order keys an import gives what it copies into a first life (not a real clock: ids from newClientId are hex). */
export const IMPORT_CLOCK = 'import';

/** The order key an import places what it copies into a first life after (`subOrder(IMPORTED, index)`): before anything written in the session. */
export const IMPORTED = formatHlc({ wallMs: 0, counter: 0, clientId: IMPORT_CLOCK });

/**
 * Where an op stands among the session's lives, if the row alone can tell: true when it belongs to the
 * row's life, false when a later delete ended its life, undefined when only the tombstone can tell (see
 * {@link enterLife}). Ops that name no life keep the older rule (legacy.ts).
 */
export function sameLife(row: SessionRow, op: Op): boolean | undefined {
  if (op.after === undefined) return legacy.sameLifeByCreate(row, op);
  // A row that names its life has the tombstone as its `after` (only a delete moves the tombstone, and it takes the row).
  if (row.after === undefined || op.after > row.after) return undefined;
  return op.after === row.after;
}

/** The clock id of an order key (the part after the HLC key's last dot). */
function clockOf(order: string): string {
  const key = hlcOf(order);
  return key.slice(key.lastIndexOf('.') + 1);
}

/**
 * The work of `row`'s life that a delete whose deleter had `seen` (and `board`) drops and never saw (see
 * {@link DroppedWork}); undefined when there is none. Reads the session's rows only when this replica
 * has applied an op the deleter had not: a delete of a session every replica had caught up on reads nothing
 * (its board is still to compare, when the delete says what it had of it).
 */
async function unseenWork(db: TabulaDb, row: SessionRow, seen: readonly string[], board: string | undefined): Promise<DroppedWork | undefined> {
  const latest = new Map(seen.map((key) => [clockOf(key), key]));
  const unseen = (order: string) => {
    const key = hlcOf(order);
    const known = latest.get(clockOf(key));
    return known === undefined || key > known;
  };
  const { userId, sessionId } = row;
  const toCompare = board === undefined ? {} : { board: { life: lifeOf(row), seen: board } };
  if (row.seen?.every((key) => !unseen(key))) return board === undefined ? undefined : { userId, sessionId, messages: [], memory: [], notes: [], state: false, ...toCompare };
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
    ...toCompare,
  };
  return work.messages.length > 0 || work.memory.length > 0 || work.notes.length > 0 || work.state || work.board ? work : undefined;
}

/**
 * Settles an op that names its life (`after`) against the session's lives, before the op's own rules
 * apply. A delete ordered after the tombstone ends the life; one at or before it changes nothing (its
 * life, or a later one, has ended already). Any other op whose `after` is past the tombstone proves
 * that delete, which ends the life first. Returns 'dead' for an op of an ended life (dropped),
 * 'deleted' for a delete that ended one, 'live' for an op of the session's current life (never a delete).
 */
export async function enterLife(db: TabulaDb, slot: SessionSlot, op: Op, after: string): Promise<'dead' | 'deleted' | 'live'> {
  const known = slot.row && op.kind !== 'session.delete' ? sameLife(slot.row, op) : undefined;
  if (known !== undefined) return known ? 'live' : 'dead';
  const tombstone = await tombstoneOf(db, slot);
  if (op.kind === 'session.delete') {
    // Whichever life it was written in: every life that began before it has ended, on every replica.
    if (op.order <= tombstone) return 'dead';
    if (slot.dropped && slot.row && op.body.seen) {
      const dropped = await unseenWork(db, slot.row, op.body.seen, op.body.board);
      if (dropped) slot.dropped.push(dropped);
    }
    await endLife(db, slot, op.order);
    return 'deleted';
  }
  if (after < tombstone) return 'dead';
  if (after > tombstone) await endLife(db, slot, after);
  return 'live';
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
 * Counts an op of this session life towards lastOrder and updatedAt, applied or superseded, so that
 * updatedAt is the same maximum on every replica whatever the order of arrival. Ops that stay local
 * count towards lastOrder only (it keeps this browser's next writes after them).
 */
export function touch(slot: SessionSlot, row: SessionRow, op: Op): void {
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

/**
 * The body of a session.delete made on `row`: what this replica has of the life it ends (`seen`, the
 * SEEN_MAX most recent clocks; `board`, what it has of the life's blackboard as `BoardRegistry.boardSeen`
 * says, when given), so that a replica holding work of that life this one never saw can name what the
 * delete drops ({@link DroppedWork}). A row of a life named before `seen` existed has neither.
 */
export function deleteBody(row: SessionRow | undefined, board?: string): OpBody<'session.delete'> {
  if (!row?.seen) return {};
  const withBoard = board === undefined ? {} : { board };
  if (row.seen.length <= SEEN_MAX) return { seen: [...row.seen], ...withBoard };
  // Kept by recency: a clock left out counts as unseen, so its work would be named even if it was seen.
  const recent = [...row.seen].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)).slice(0, SEEN_MAX);
  return { seen: recent.sort((a, b) => (clockOf(a) < clockOf(b) ? -1 : 1)), ...withBoard };
}

function newSessionRow(op: OpOf<'session.create'>): SessionRow {
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
    // Every op counts towards updatedAt, the create too (see touch), so replicas agree on it.
    updatedAt: Math.max(op.body.createdAt, wallMs(op)),
    lastOrder: op.order,
    forkOf: op.body.forkOf,
    tokenTotals: {},
    // A named life keeps what this replica has of it from its create on, so a delete made here can say so.
    ...(op.after === undefined ? {} : { seen: [hlcOf(op.order)] }),
  };
}

/**
 * session.create, once its life is settled (enterLife, or legacy.ts for a create that names none):
 * makes the row, or, when two devices created the same session, keeps the earliest create's fields.
 * Unlike the other rules it runs without a row, so it is not in the table of index.ts.
 */
export function createSession(slot: SessionSlot, op: OpOf<'session.create'>): boolean {
  const existing = slot.row;
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
  // A later create of a session that exists (made concurrently on another device): only the maxima
  // moved (touch marks the row), nothing a reader sees.
  touch(slot, existing, op);
  return false;
}
