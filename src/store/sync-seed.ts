/**
 * The first time a profile opens with sync on for a user, what it already
 * holds of that user goes to the user's outbox too: a user who chatted
 * offline and signs in later finds those chats on their other devices. Each
 * session is described by the ops that rebuild it, with its stored order
 * keys and ids, so replicas apply them like any other ops, and an op that
 * also reached the outbox the usual way applies once. From then on the user
 * has sync state here (their seq counter), and every write of theirs is
 * queued as it is made, with sync on or off (writer.ts): the seed runs once.
 */
import { subOrder } from '../core/hlc.js';
import type { Op, OpBody, OpKind } from '../core/ops.js';
import { newId } from './ids.js';
import { sessionRange, sessionTables, userSessionRows, type SessionRow, type TabulaDb } from './schema.js';
import { dexieRequests } from './requests.js';
import { syncNames } from './sync-host.js';
import { queueOutbox } from './writer.js';

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

/**
 * The ops that rebuild a stored session, with its rows' order keys and ids (see the module comment). A
 * reply still streaming is left out: it travels when it is finished.
 */
export async function sessionOps(db: TabulaDb, row: SessionRow): Promise<Op[]> {
  const { userId, sessionId } = row;
  const range = sessionRange(userId, sessionId);
  const [messages, journal, notes, memory, checkpoints] = await Promise.all([
    db.messages.where('[userId+sessionId+order]').between(...range).toArray(),
    db.journal.where('[userId+sessionId+order]').between(...range).toArray(),
    db.notes.where('[userId+sessionId+order]').between(...range).toArray(),
    db.memory.where('[userId+sessionId+scope]').between(...range).toArray(),
    db.checkpoints.where('[userId+sessionId]').equals([userId, sessionId]).toArray(),
  ]);
  const ops: Op[] = [];
  // Each op names the row's life, as the writer stamped it (rows from before lives were named have none).
  const life = row.after === undefined ? {} : { after: row.after };
  const op = <K extends OpKind>(kind: K, order: string, body: OpBody<K>, id = newId()) => ops.push({ id, kind, userId, sessionId, order, ...life, body } as Op);

  op('session.create', row.createdOrder, { createdAt: row.createdAt, forkOf: row.forkOf });
  if (row.prefixOrder !== '') op('prefix.set', row.prefixOrder, { prefix: row.prefix });
  if (row.version > 0) op('state.save', row.versionOrder || row.createdOrder, { version: row.version, patch: row.state });
  for (const checkpoint of checkpoints) {
    op('checkpoint.create', checkpoint.order, { id: checkpoint.id, label: checkpoint.label, at: checkpoint.at, snapshot: checkpoint.snapshot });
  }
  // A reply still streaming travels when it is finished (its final update carries it whole).
  for (const m of messages) if (m.status !== 'streaming') op('message.append', m.order, { id: m.id, createdAt: m.createdAt, status: m.status, message: m.message });
  // One op per entry, keyed by the entry's row: entries keep their relative order on every replica,
  // where each is stored at subOrder(its order, 0), so the commit names the covered entry that way.
  for (const entry of journal) op('journal.append', entry.order, { entries: [entry.entry] }, entry.id);
  const through = row.journalThrough ?? journal[row.journalWatermark - 1]?.order;
  if (row.journalWatermark > 0 && through !== undefined) op('journal.commit', through, { watermark: row.journalWatermark, through: subOrder(through, 0) });
  // A note's row id is the id of the op that added it: the same note queued twice is added once.
  for (const note of notes) op('note.add', note.order, { text: note.text, runId: note.runId, scope: note.scope, at: note.at }, note.id);
  for (const m of memory) {
    if (m.deleted || m.value === null) op('memory.delete', m.order, { scope: m.scope, key: m.key });
    else op('memory.set', m.order, { scope: m.scope, key: m.key, value: m.value });
  }
  return ops;
}
