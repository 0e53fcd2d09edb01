/**
 * The copies of a session: `export()` (portable JSON, format in
 * export-format.ts), `fork()` (an export imported under a new id),
 * `checkpoint()` and `restore()` (a snapshot kept with the session, put back
 * as a new version), and {@link importInto}, which turns an export into the
 * ops that recreate it. Every row a copy takes is validated first, as every
 * read is: a corrupt row is named, never copied. How a restore folds into
 * concurrent writes is store/apply/'s rule.
 */
import type { Blackboard } from '../../blackboard/blackboard.js';
import { TabulaError } from '../../core/errors.js';
import { subOrder } from '../../core/hlc.js';
import { shortHash } from '../../core/hash.js';
import { checkName } from '../../core/names.js';
import { checkOptions, describeValue } from '../../core/args.js';
import type { MessageStatus } from '../../core/ops.js';
import { IMPORTED } from '../apply/index.js';
import { checkRow, type MessageRow } from '../db/rows.js';
import { sessionRange } from '../db/schema.js';
import { mapStorageError } from '../errors.js';
import { splitCheckpoint } from '../replication/outbox.js';
import { newId } from '../ids.js';
import { checkMessageRow } from '../message-row.js';
import type { CheckpointInfo } from '../types.js';
import type { Emitter } from '../writer.js';
import type { SessionExport } from './export-format.js';
import type { Session, SessionImporter } from './index.js';
import { journalRows, messageRows, noteRows, type HandleScope } from './scope.js';

/**
 * The status of a message in a copy (export, fork, checkpoint). A message still streaming is copied as
 * `interrupted` with its text so far: the stream writes to the original only, so in the copy it would
 * stay `streaming` forever.
 */
function copiedStatus(status: MessageStatus): MessageStatus {
  return status === 'streaming' ? 'interrupted' : status;
}

/**
 * A message row as every copy holds it (an export's message, a checkpoint's), checked first: a corrupt
 * row fails the copy with `schema/invalid` naming its key and field, instead of being frozen into a
 * checkpoint (and queued for sync) or written to a file.
 */
function copiedMessage(row: MessageRow): SessionExport['messages'][number] {
  const { id, order, createdAt, status, message } = checkMessageRow(row);
  return { id, order, createdAt, status: copiedStatus(status), message };
}

/** The session as an export, without its blackboard (see {@link exportSession}), read in one transaction. */
async function exportData(scope: HandleScope): Promise<SessionExport> {
  const { store: { db }, userId, sessionId, label } = scope;
  scope.ensureOpen();
  try {
    return await db.transaction('r', [db.sessions, db.messages, db.journal, db.notes, db.memory], async () => {
      const row = await scope.readRow();
      const [messages, journal, notes, memory] = await Promise.all([
        messageRows(scope).toArray(),
        journalRows(scope).toArray(),
        noteRows(scope).toArray(),
        db.memory.where('[userId+sessionId+scope]').between(...sessionRange(userId, sessionId)).toArray(),
      ]);
      return {
        format: 'tabula.session' as const,
        formatVersion: 1 as const,
        userId,
        sessionId,
        createdAt: row.createdAt,
        updatedAt: row.updatedAt,
        version: row.version,
        forkOf: row.forkOf,
        prefix: row.prefix,
        state: row.state,
        messages: messages.map(copiedMessage),
        journal: { entries: journal.map((j) => checkRow('journal', j.id, j).entry), watermark: row.journalWatermark },
        notes: notes.map((n) => checkRow('notes', n.id, n)).map(({ text, runId, scope, at }) => ({ text, runId, scope, at })),
        memory: memory
          .map((m) => checkRow('memory', [m.userId, m.sessionId, m.scope, m.key], m))
          .filter((m) => !m.deleted)
          .map(({ scope, key, value }) => ({ scope, key, value: value })),
      };
    });
  } catch (error) {
    throw mapStorageError(error, `export ${label}`);
  }
}

/** `session.export()`: the session's data, then its blackboard once loaded (`board` opens it on first use). */
export async function exportSession(scope: HandleScope, board: () => Blackboard): Promise<SessionExport> {
  const data = await exportData(scope);
  const blackboard = board();
  await blackboard.whenLoaded;
  return { ...data, blackboard: blackboard.toJSON() };
}

/** `session.fork(newSessionId, options)`: the session exported, with its blackboard, and imported under the new id. */
export async function forkSession(
  scope: HandleScope,
  copy: { board: () => Blackboard; importSession: SessionImporter },
  newSessionId: string,
  options: { userId?: string } | undefined,
): Promise<Session> {
  const { userId, sessionId, contextSchema } = scope;
  const forkUserId = checkName(checkOptions(options, 'fork(sessionId, options)').userId ?? userId, 'fork({ userId })');
  checkName(newSessionId, 'fork(sessionId)');
  const data = await exportSession(scope, copy.board);
  return copy.importSession({ ...data, userId: forkUserId, sessionId: newSessionId, forkOf: { userId, sessionId } }, { userId: forkUserId, contextSchema });
}

/** `session.checkpoint(label)`: the prefix, state and messages as they are now, kept as a checkpoint of the session. */
export async function createCheckpoint(scope: HandleScope, checkpointLabel: unknown): Promise<CheckpointInfo> {
  if (checkpointLabel !== undefined && typeof checkpointLabel !== 'string') {
    throw new TabulaError('argument/invalid', 'checkpoint(label) takes a string label or nothing.');
  }
  return scope.write('create a checkpoint', async (tx) => {
    const row = tx.existing();
    const rows = await messageRows(scope).toArray();
    const id = newId();
    const at = Date.now();
    // A long chat is over the size one op may hold to sync: its head and parts, each under it, in one write.
    const { create, parts } = splitCheckpoint(
      { userId: scope.userId, sessionId: scope.sessionId, ...(row.after === undefined ? {} : { after: row.after }) },
      { id, label: checkpointLabel ?? null, at, prefix: row.prefix, state: row.state },
      rows.map(copiedMessage),
    );
    await tx.emit('checkpoint.create', create);
    for (const part of parts) await tx.emit('checkpoint.part', part);
    return Object.freeze({ id, label: checkpointLabel ?? null, at });
  });
}

/** `session.checkpoints()`: the session's checkpoints, oldest first (one still arriving from sync is not listed yet). */
export async function listCheckpoints(scope: HandleScope): Promise<CheckpointInfo[]> {
  const { store: { db }, userId, sessionId } = scope;
  const rows = await scope.read('list checkpoints', () => db.checkpoints.where('[userId+sessionId]').equals([userId, sessionId]).toArray());
  return rows
    .filter((row) => row.pending === undefined)
    .sort((a, b) => (a.order < b.order ? -1 : 1))
    .map(({ id, label: l, at }) => Object.freeze({ id, label: l, at }));
}

/** `session.restore(checkpointId)`: puts the checkpoint's messages, prefix and state back, as a new version. */
export async function restoreCheckpoint(scope: HandleScope, checkpointId: unknown): Promise<void> {
  const { store: { db }, userId, sessionId, label } = scope;
  if (typeof checkpointId !== 'string' || checkpointId === '') {
    throw new TabulaError('argument/invalid', `restore(checkpointId) takes the id of a checkpoint from session.checkpoints(), got ${describeValue(checkpointId)}.`);
  }
  await scope.write('restore a checkpoint', async (tx) => {
    const row = tx.existing();
    const checkpoint = await db.checkpoints.get(checkpointId);
    if (!checkpoint || checkpoint.userId !== userId || checkpoint.sessionId !== sessionId) {
      throw new TabulaError('checkpoint/not-found', `${label} has no checkpoint ${JSON.stringify(checkpointId)}; list them with session.checkpoints().`);
    }
    checkRow('checkpoints', checkpointId, checkpoint);
    if (checkpoint.pending) {
      throw new TabulaError('checkpoint/incomplete', `Checkpoint ${JSON.stringify(checkpointId)} of ${label} is still arriving from sync; restore it once session.checkpoints() lists it.`);
    }
    await tx.emit('checkpoint.restore', { id: checkpointId, version: row.version + 1, base: row.versionOrder ?? '' });
  });
}

/**
 * The order key an import places rows after when their own does not do (`subOrder(place, index)`): the
 * delete the session life began after, or, in a first life, `IMPORTED`. Either sorts before every op of
 * the life and is the same on every replica of it; no op of the life has it as its own order key, so a
 * row placed there is known for a copy (see `DroppedWork`).
 */
function placeOf(after: string): string {
  return after === '' ? IMPORTED : after;
}

/** An id an import derives from what it copies into one session life: the same on every device that imports the same thing there. */
function importedId(kind: string, target: { userId: string; sessionId: string; after: string }, what: unknown): string {
  return `${kind}-${shortHash(JSON.stringify([target.userId, target.sessionId, target.after, what]))}`;
}

/**
 * Rewrites an export, validated by the caller (parseSessionExport), into the ops that recreate it (used
 * by import and fork). What it copies is placed by what it copies, never by this device's clock, so
 * two devices that import (or fork) one history into the same id store it once and in one order on
 * every replica: messages keep their ids and their order keys (`message.append`'s `order`); notes and
 * journal entries get ids derived from their content and the session life, in the export's order,
 * before anything written later. Every row sorts after the delete the life began after (its `after`),
 * as rows written in the life do: those before it, and all of them in a file whose messages share order
 * keys, are placed by their place in the export (see {@link placeOf}). The other ops (create, prefix,
 * state, memory) converge by their own rules: the earliest create, the last prefix and memory write, the
 * winning save (two imports' saves of one state are no conflict).
 */
export async function importInto(tx: Emitter, data: SessionExport): Promise<void> {
  await tx.emit('session.create', { createdAt: data.createdAt, forkOf: data.forkOf });
  const target = { userId: data.userId, sessionId: data.sessionId, after: tx.existing().after ?? '' };
  const place = placeOf(target.after);
  if (data.prefix.systemPrompt !== '' || data.prefix.grounding.length > 0 || data.prefix.schemaBlock !== null) {
    await tx.emit('prefix.set', { prefix: data.prefix });
  }
  if (data.version > 0) await tx.emit('state.save', { version: data.version, patch: data.state, base: '' });
  const messages = [...data.messages].sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  // A file whose messages share order keys (written by hand or another tool) orders them by its array alone.
  const tied = messages.some((m, index) => index > 0 && m.order === messages[index - 1]?.order);
  await tx.emitAppends(
    messages.map((m, index) => ({
      id: m.id,
      createdAt: m.createdAt,
      status: m.status,
      message: m.message,
      order: !tied && m.order > target.after ? m.order : subOrder(place, index),
    })),
  );
  if (data.journal.entries.length > 0) {
    const id = importedId('journal', target, data.journal.entries);
    await tx.emit('journal.append', { entries: data.journal.entries, id, order: place });
    const watermark = Math.min(data.journal.watermark, data.journal.entries.length);
    if (watermark > 0) await tx.emit('journal.commit', { watermark, through: subOrder(place, watermark - 1) });
  }
  // Two equal notes of one export are two notes: the occurrence tells them apart.
  const occurrences = new Map<string, number>();
  for (const [index, note] of data.notes.entries()) {
    const content = JSON.stringify([note.text, note.runId, note.scope, note.at]);
    const occurrence = occurrences.get(content) ?? 0;
    occurrences.set(content, occurrence + 1);
    await tx.emit('note.add', { ...note, id: importedId('note', target, [content, occurrence]), order: subOrder(place, index) });
  }
  for (const { scope, key, value } of data.memory) await tx.emit('memory.set', { scope, key, value });
}
