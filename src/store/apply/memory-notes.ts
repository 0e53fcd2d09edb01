/**
 * A session's memory keys and notes, rows of their own tables the session
 * row only points at: a memory key (set or deleted) keeps its greatest
 * order, and a note named by its op (an import's) is stored once, where the
 * first in order puts it.
 */
import { changed, type Rule } from './slot.js';

/** note.add: stores the note once; two adds of one id (two imports of one history) keep the first in order. */
export const addNote: Rule<'note.add'> = async (db, slot, _row, op) => {
  const { id = op.id, order = op.order, text, runId, scope, at } = op.body;
  const current = await db.notes.get(id);
  const note = { id, userId: op.userId, sessionId: op.sessionId, order, text, runId, scope, at };
  if (current) {
    // The same note added twice (two imports of one history, which name its id): it sorts where the
    // first in order puts it, whichever arrives first. A replay, or a note of another session, changes nothing.
    if (current.userId !== op.userId || current.sessionId !== op.sessionId || order >= current.order) return false;
    await db.notes.put(note);
    return changed(slot);
  }
  await db.notes.add(note);
  return changed(slot);
};

/** memory.set and memory.delete: the greatest order wins; a delete leaves the key as a tombstone (deleted, value null). */
export const setMemory: Rule<'memory.set' | 'memory.delete'> = async (db, slot, _row, op) => {
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
  return changed(slot);
};
