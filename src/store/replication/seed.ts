/**
 * What a profile holds of a user, as ops, for a sync server that does not
 * have it. The first time a profile opens with sync on for a user, what it
 * already holds of that user goes to the user's outbox (a user who chatted
 * offline and signs in later finds those chats on their other devices); and
 * when the server turns out to have lost the user's data (a new epoch, a
 * cursor past its head, a push answered with less than it acknowledged),
 * the sync engine has the user's sync state started over and all of it
 * queued again (`reseedOutbox`, through `Replica.reseed`). Each session is
 * described by the ops that rebuild it,
 * with its stored order keys and ids, so replicas apply them like any other
 * ops, and one that also reached them the usual way (a replica that has the
 * session, an op that was queued too) applies once. From the first seed on
 * the user has sync state here (their seq counter), and every write of
 * theirs is queued as it is made, with sync on or off (writer.ts).
 */
import { hlcOf, keyAfter, parseHlc, subOrder } from '../../core/hlc.js';
import type { Op, OpBody, OpKind } from '../../core/ops.js';
import { newId } from '../ids.js';
import { removedMessagePrefix } from '../db/keys.js';
import { sessionRange, sessionTables, userOutbox, userSessionRows, type TabulaDb } from '../db/schema.js';
import { type SessionRow } from '../db/rows.js';
import { dexieRequests } from '../requests.js';
import { BOARD_QUEUED_PREFIX, syncNames } from './keys.js';
import { queueOutbox, splitCheckpoint } from './outbox.js';

/**
 * Queues the ops that rebuild every session of `userId`, once per profile and user, in one transaction,
 * and starts the user's seq counter (at 0 when nothing was queued), which marks them as a user who syncs here.
 */
export function seedOutbox(db: TabulaDb, userId: string): Promise<void> {
  return db.transaction('rw', sessionTables(db), async () => {
    const [seeded, counter] = await db.meta.bulkGet([syncNames.seeded(userId), syncNames.seq(userId)]);
    if (!counter) await db.meta.put({ key: syncNames.seq(userId), value: 0 });
    if (seeded) return;
    const sessions = await userSessionRows(db, userId);
    for (const row of sessions) await queueOutbox(dexieRequests(db), userId, await sessionOps(db, row));
    await db.meta.put({ key: syncNames.seeded(userId), value: true });
  });
}

/** The meta key prefix of a user's session tombstones (`tombstoneKey` in schema.ts: `deleted:["user","session"]`). */
const tombstonePrefix = (userId: string) => `deleted:${JSON.stringify([userId]).slice(0, -1)},`;

/**
 * Starts the sync state of `userId` over for a server that does not hold it, in one transaction: the
 * user's outbox is emptied and filled again, from seq 1, with the ops that rebuild every session of the
 * user here and the deletes of the sessions deleted here (whatever was queued is part of that: it is
 * applied here); the pull cursor goes (the next pull reads the server from the start); the client id
 * becomes `next.clientId` (a server restored from an older copy still knows the old one, at a seq below
 * the new numbering) and the server epoch `next.epoch` when one is given; and every board is marked as
 * queued of nothing, so the engine queues each board whole. Parked items stay parked. Does nothing and
 * returns false when the client id stored is not `expectedClientId`: another tab has started over already.
 */
export function reseedOutbox(db: TabulaDb, userId: string, next: { clientId: string; epoch: string | null }, expectedClientId: string): Promise<boolean> {
  return db.transaction('rw', sessionTables(db), async () => {
    const stored = await db.meta.get(syncNames.clientId(userId));
    if (stored?.value !== expectedClientId) return false;
    await userOutbox(db, userId).delete();
    await db.meta.put({ key: syncNames.seq(userId), value: 0 });
    await db.meta.put({ key: syncNames.clientId(userId), value: next.clientId });
    await db.meta.delete(syncNames.cursor(userId));
    if (next.epoch !== null) await db.meta.put({ key: syncNames.epoch(userId), value: next.epoch });
    // JSON escapes quotes inside strings, so this prefix matches this user's board keys and no other's.
    await db.meta.where('key').startsWith(`${BOARD_QUEUED_PREFIX}${JSON.stringify([userId]).slice(0, -1)},`).delete();
    const requests = dexieRequests(db);
    const sessions = await userSessionRows(db, userId);
    const live = new Set(sessions.map((row) => row.sessionId));
    for (const row of sessions) await queueOutbox(requests, userId, await sessionOps(db, row));
    // A session deleted here: its delete, so a replica that still holds it (the server lost the delete) ends it too.
    const deletes: Op[] = [];
    for (const tombstone of await db.meta.where('key').startsWith(tombstonePrefix(userId)).toArray()) {
      const [, sessionId] = JSON.parse(tombstone.key.slice('deleted:'.length)) as [string, string];
      if (live.has(sessionId) || typeof tombstone.value !== 'string') continue;
      // Its own life is not known here any more; '' (a first life) is ordered before any delete, and a delete ends every life before it.
      deletes.push({ id: newId(), kind: 'session.delete', userId, sessionId, order: tombstone.value, after: '', body: {} });
    }
    await queueOutbox(requests, userId, deletes);
    return true;
  });
}

/** The order of the op that made a journal row: its row is at `subOrder(op.order, index)`. */
function journalOpOf(row: { id: string; order: string }): { id: string; order: string; index: number } | null {
  const colon = row.id.lastIndexOf(':');
  const hash = row.order.lastIndexOf('#');
  if (colon <= 0 || hash <= 0) return null;
  const index = Number(row.id.slice(colon + 1));
  const order = row.order.slice(0, hash);
  if (!Number.isSafeInteger(index) || subOrder(order, index) !== row.order) return null;
  return { id: row.id.slice(0, colon), order, index };
}

/**
 * The ops that rebuild a stored session, with its rows' ids and order keys (see the module comment), in
 * the order they apply: the create, a clear or restore's cut (only what it left behind is here), the
 * prefix and state, checkpoints, messages (and the last update of each updated one, so a replica holding
 * an older text of it takes this one by the usual rules), removed messages, journal entries with their
 * commit, notes and memory; then, when the session was changed after all of those (a commit that changed
 * nothing, a save that lost), a second create that carries its `updatedAt`, so replicas list it as
 * changed when it was. A reply still streaming is left out: it travels when it is finished.
 */
export async function sessionOps(db: TabulaDb, row: SessionRow): Promise<Op[]> {
  const { userId, sessionId } = row;
  const range = sessionRange(userId, sessionId);
  const [messages, journal, notes, memory, checkpoints, removed] = await Promise.all([
    db.messages.where('[userId+sessionId+order]').between(...range).toArray(),
    db.journal.where('[userId+sessionId+order]').between(...range).toArray(),
    db.notes.where('[userId+sessionId+order]').between(...range).toArray(),
    db.memory.where('[userId+sessionId+scope]').between(...range).toArray(),
    db.checkpoints.where('[userId+sessionId]').equals([userId, sessionId]).toArray(),
    db.meta.where('key').startsWith(removedMessagePrefix(userId, sessionId)).toArray(),
  ]);
  const ops: Op[] = [];
  // Each op names the row's life, as the writer stamped it (rows from before lives were named have none).
  const life = row.after === undefined ? {} : { after: row.after };
  const op = <K extends OpKind>(kind: K, order: string, body: OpBody<K>, id = newId()) => ops.push({ id, kind, userId, sessionId, order, ...life, body } as Op);

  op('session.create', row.createdOrder, { createdAt: row.createdAt, forkOf: row.forkOf });
  // Before the messages: a replica drops what it holds from before the cut, and what this one kept survives it.
  if (row.clearedBefore !== '' && row.clearedBefore > row.createdOrder) op('session.clear', row.clearedBefore, {});
  if (row.prefixOrder !== '') op('prefix.set', row.prefixOrder, { prefix: row.prefix });
  // With the base the save named: a replica where another save stands tells from it whether it was built on that one.
  if (row.version > 0) op('state.save', row.versionOrder || row.createdOrder, { version: row.version, patch: row.state, ...(row.versionBase === undefined ? {} : { base: row.versionBase }) });
  // Split as a checkpoint is written (splitCheckpoint), its parts at its head's order key: a replica that
  // saw the head saw them. One still arriving goes as it is here, head and parts, with the restores waiting for it.
  for (const checkpoint of checkpoints) {
    const { id, label, at, snapshot, pending } = checkpoint;
    if (pending) {
      op('checkpoint.create', checkpoint.order, { id, label, at, snapshot, count: pending.count });
      for (const chunk of pending.chunks) op('checkpoint.part', checkpoint.order, { id, from: chunk.from, messages: chunk.messages });
      for (const restore of pending.restores) ops.push({ ...restore, userId, sessionId, ...life });
      continue;
    }
    const { create, parts } = splitCheckpoint({ userId, sessionId, ...life }, { id, label, at, prefix: snapshot.prefix, state: snapshot.state }, snapshot.messages);
    op('checkpoint.create', checkpoint.order, create);
    for (const part of parts) op('checkpoint.part', checkpoint.order, part);
  }
  // A reply still streaming travels when it is finished (its final update carries it whole).
  for (const m of messages) {
    if (m.status === 'streaming') continue;
    op('message.append', m.order, { id: m.id, createdAt: m.createdAt, status: m.status, message: m.message });
    // A replica may hold this message as an earlier update left it: the last update wins there as it did here.
    if (m.updateOrder !== undefined && m.updateOrder > m.order) op('message.update', m.updateOrder, { id: m.id, status: m.status, message: m.message, order: m.order, createdAt: m.createdAt });
  }
  for (const tombstone of removed) {
    if (typeof tombstone.value === 'string') op('message.remove', tombstone.value, { id: tombstone.key.slice(removedMessagePrefix(userId, sessionId).length) });
  }
  // Each entry goes back in the op that made it (its row id is `${op.id}:${index}`, its order
  // subOrder(op.order, index)): a replica that has the entries already finds the op's id and adds none.
  const groups = new Map<string, { order: string; entries: { index: number; entry: (typeof journal)[number]['entry'] }[] }>();
  for (const entry of journal) {
    const made = journalOpOf(entry);
    // Rows an import placed right after the delete its life began after (`subOrder(after, i)`) came from
    // no op of their own at that order: an op at the delete's own order would not be of this life.
    if (!made || (row.after !== undefined && made.order <= row.after)) {
      op('journal.append', entry.order, { entries: [entry.entry] }, entry.id);
      continue;
    }
    const group = groups.get(made.id) ?? { order: made.order, entries: [] };
    group.entries.push({ index: made.index, entry: entry.entry });
    groups.set(made.id, group);
  }
  for (const [id, group] of groups) {
    group.entries.sort((a, b) => a.index - b.index);
    // An op whose entries are not all here any more (never, but rows come from storage) goes entry by entry.
    if (group.entries.every((entry, i) => entry.index === i)) op('journal.append', group.order, { entries: group.entries.map((entry) => entry.entry) }, id);
    else for (const entry of group.entries) op('journal.append', subOrder(group.order, entry.index), { entries: [entry.entry] }, `${id}:${entry.index}`);
  }
  const through = row.journalThrough ?? journal[row.journalWatermark - 1]?.order;
  if (row.journalWatermark > 0 && through !== undefined) {
    const commitOrder = row.after !== undefined && hlcOf(through) <= row.after ? through : hlcOf(through);
    op('journal.commit', commitOrder, { watermark: row.journalWatermark, through });
  }
  // A note's row id is the id of the op that added it: the same note queued twice is added once.
  for (const note of notes) op('note.add', note.order, { text: note.text, runId: note.runId, scope: note.scope, at: note.at }, note.id);
  for (const m of memory) {
    if (m.deleted || m.value === null) op('memory.delete', m.order, { scope: m.scope, key: m.key });
    else op('memory.set', m.order, { scope: m.scope, key: m.key, value: m.value });
  }
  // Replicas count every op's wall time towards updatedAt; the ops above may not reach this one's.
  let latest = row.createdAt;
  for (const made of ops) latest = Math.max(latest, parseHlc(hlcOf(made.order)).wallMs);
  if (row.updatedAt > latest) op('session.create', keyAfter(row.createdOrder, parseHlc(hlcOf(row.createdOrder)).clientId), { createdAt: row.updatedAt, forkOf: row.forkOf });
  return ops;
}
