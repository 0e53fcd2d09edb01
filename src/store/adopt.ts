/**
 * Sign-in adopts local work: `tabula.adopt(fromUserId)` moves another local
 * user's sessions (a guest's, written before sign-in) to the Tabula's user.
 * One transaction per session deletes the original and applies, through
 * `applyOp` like any op, the ops that rebuild it (replication/seed.ts) under the
 * new user, with the rows' ids and order keys, and queues them for that
 * user's sync; its board's content travels in a meta row of the same
 * transaction and is written into the new user's board after it, so a move
 * cut short is finished by the next adopt. It does not merge sessions: one
 * whose id the new user already has stays where it is.
 */
import { TabulaError } from '../core/errors.js';
import { hlcOf } from '../core/hlc.js';
import { checkName } from '../core/names.js';
import type { JsonValue } from '../core/json.js';
import type { Op, OpKind } from '../core/ops.js';
import { applyAppends, applyOp, flushSlot, loadSlot, type AppendOp, type SessionSlot } from './apply/index.js';
import { newId } from './ids.js';
import { dexieRequests } from './requests.js';
import { mapStorageError } from './errors.js';
import { readSessionOpen } from './open-read.js';
import type { Recovery } from './recovery.js';
import { lifeOf, type OutboxRow } from './db/rows.js';
import { sessionTables, userSessionRows, type TabulaDb } from './db/schema.js';
import { tombstoneKey } from './db/keys.js';
import { afterCommit } from './after-commit.js';
import { syncNames } from './replication/keys.js';
import { queueOutbox } from './replication/outbox.js';
import { sessionOps } from './replication/seed.js';
import { assertOpen, type StoreContext } from './context.js';

/** The meta key of a session moved to `userId` whose board is still to be written (see {@link finishAdopted}). */
const movingKey = (userId: string, sessionId: string) => `adopting:${JSON.stringify([userId, sessionId])}`;

/** A move's board part, kept in meta until it is written: whose board it was, its life there, and its content. */
interface MovingBoard {
  from: string;
  life: string;
  board: { [key: string]: JsonValue };
}

/** The slot's row as the ops left it (TypeScript would keep the narrowing of a check made before them). */
const rowOf = (slot: SessionSlot) => slot.row;

/** Aborts the move's transaction: the session stays with its user. */
class Kept extends Error {}

/**
 * Moves session `sessionId` of `from` to `to` (see the module comment); false when it stays where it is:
 * `to` has a session of that id, a reply is still streaming in it, or the rebuilt session would not
 * live under `to` (a delete of that id that `to` made ends it).
 */
export async function adoptSession(store: StoreContext, from: string, to: string, sessionId: string): Promise<boolean> {
  const { db } = store;
  const row = await db.sessions.get([from, sessionId]);
  if (!row) return false;
  // What the board holds now is what moves; a board written to in another tab during the move may lose that write.
  const lease = store.boards.acquire(from, sessionId);
  let board: MovingBoard['board'];
  try {
    await lease.blackboard.whenLoaded;
    board = lease.blackboard.toJSON();
  } finally {
    await lease.release();
  }
  const queued = new Map<string, OutboxRow[]>();
  let kinds: OpKind[] = [];
  try {
    await db.transaction('rw', sessionTables(db), async () => {
      const requests = dexieRequests(db);
      const [ended, slot, streaming, tombstone] = await Promise.all([
        loadSlot(db, from, sessionId),
        loadSlot(db, to, sessionId),
        db.messages.where('[userId+sessionId+streaming]').equals([from, sessionId, 1]).count(),
        db.meta.get(tombstoneKey(to, sessionId)),
      ]);
      const guest = ended.row;
      // Changed since the board was read (written, deleted, created again): left for the next adopt.
      if (!guest || guest.lastOrder !== row.lastOrder || lifeOf(guest) !== lifeOf(row) || slot.row || streaming > 0) throw new Kept();
      // The copy's life follows the last delete of that id `to` made here, as a session `to` created now would.
      const after = typeof tombstone?.value === 'string' ? tombstone.value : '';
      const copy = (await sessionOps(db, guest)).map((op): Op => ({ ...op, userId: to, after }));
      let order = store.clock.now();
      if (order <= guest.lastOrder) order = store.clock.receive(hlcOf(guest.lastOrder));
      const end = { id: newId(), kind: 'session.delete', userId: from, sessionId, order, ...(guest.after === undefined ? {} : { after: guest.after }), body: {} } as Op;
      // The original goes first: notes, journal entries and checkpoints are keyed by ids the copy keeps.
      await applyOp(db, ended, end);
      await flushSlot(requests, ended);
      // In the order sessionOps gives, its messages (one run) applied as one batch, as a pulled page's are.
      const appends = copy.filter((op): op is AppendOp => op.kind === 'message.append');
      const applied: Op[] = [];
      for (const op of copy) {
        if (op.kind !== 'message.append') {
          if (await applyOp(db, slot, op)) applied.push(op);
        } else if (op === appends[0]) applied.push(...(await applyAppends(requests, slot, appends)));
      }
      await flushSlot(requests, slot);
      // A delete of that id `to` made that this copy's create does not come after: nothing of it lands.
      if (rowOf(slot)?.createdOrder !== guest.createdOrder) throw new Kept();
      kinds = [...new Set(applied.map((op) => op.kind))];
      if (Object.keys(board).length > 0) await db.meta.put({ key: movingKey(to, sessionId), value: { from, life: lifeOf(guest), board } satisfies MovingBoard });
      for (const [user, ops] of [[to, copy], [from, [end]]] as const) {
        const counter = db.meta.get(syncNames.seq(user));
        if (store.sync?.userId === user || (await counter) !== undefined) queued.set(user, await queueOutbox(requests, user, ops, counter));
      }
    });
  } catch (error) {
    if (error instanceof Kept) return false;
    throw error;
  }
  afterCommit(store, {
    origin: 'local',
    rows: [from, to].map((userId) => ({ userId, sessionId, row: undefined })),
    changes: [
      { userId: from, sessionId, kinds: ['session.delete'] },
      { userId: to, sessionId, kinds },
    ],
    queued,
  });
  await store.boards.destroy(from, sessionId, lifeOf(row));
  await finishAdopted(store, to, sessionId);
  return true;
}

/**
 * Writes the board of a session moved to `to` into `to`'s board of it, then forgets it: after the move's
 * transaction, or on the next adopt when a crash came in between. Writing it twice sets the same values.
 */
export async function finishAdopted(store: StoreContext, to: string, sessionId: string): Promise<void> {
  const { db } = store;
  const key = movingKey(to, sessionId);
  const stored = (await db.meta.get(key))?.value as MovingBoard | undefined;
  if (!stored) return;
  const lease = store.boards.acquire(to, sessionId);
  try {
    await lease.blackboard.whenLoaded;
    lease.blackboard.update(stored.board);
    await lease.blackboard.flushed();
  } catch (error) {
    // The session was deleted meanwhile: its board went with it.
    if (!(error instanceof TabulaError && error.code === 'session/not-found')) throw error;
  } finally {
    await lease.release();
  }
  // A crash may have come before the original's board was deleted.
  await store.boards.destroy(stored.from, sessionId, stored.life);
  await db.meta.delete(key);
}

/** The sessions moved to `to` whose board is still to be written (a move cut short). */
export async function unfinishedAdoptions(db: TabulaDb, to: string): Promise<string[]> {
  const prefix = movingKey(to, '').slice(0, -2);
  const keys = await db.meta.where('key').startsWith(prefix).primaryKeys();
  return keys.map((key) => (JSON.parse(key.slice('adopting:'.length)) as [string, string])[1]);
}

/** What `tabula.adopt()` did: the session ids it moved, and those it left with the other user. */
export interface AdoptResult {
  /** The ids of the sessions moved to this Tabula's user. */
  readonly adopted: readonly string[];
  /** The ids of the sessions left with the other user: this user already has the id, or a reply is still streaming. */
  readonly kept: readonly string[];
}

/**
 * `tabula.adopt(fromUserId)`: finishes the moves to the store's user cut short before, then moves every
 * session of `fromUserId` that can move (see {@link adoptSession}), each in its own transaction.
 */
export async function adoptFrom(store: StoreContext, recovery: Recovery, fromUserId: unknown): Promise<AdoptResult> {
  assertOpen(store);
  const { db, defaultUserId } = store;
  const from = checkName(fromUserId, 'adopt(fromUserId)');
  if (from === defaultUserId) {
    throw new TabulaError('argument/invalid', `adopt(fromUserId) moves another user's sessions to this Tabula's user "${defaultUserId}"; it was given that user.`);
  }
  const adopted: string[] = [];
  const kept: string[] = [];
  try {
    for (const sessionId of await unfinishedAdoptions(db, defaultUserId)) await finishAdopted(store, defaultUserId, sessionId);
    for (const { sessionId } of await userSessionRows(db, from)) {
      // A reply whose tab is gone is marked interrupted first (as opening the session would), so it can move.
      const { row, unfinished } = await readSessionOpen(db, from, sessionId);
      if (row) await recovery.check(from, sessionId, unfinished);
      ((await adoptSession(store, from, defaultUserId, sessionId)) ? adopted : kept).push(sessionId);
    }
  } catch (error) {
    throw mapStorageError(error, `adopt the sessions of user "${from}"`);
  }
  return { adopted, kept };
}
