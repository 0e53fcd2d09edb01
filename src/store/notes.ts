/**
 * Notes: progress lines of a session, saved at once. Shared by
 * `session.note()` and a run's `ctx.note()`, which stamps its runId and scope.
 */
import { TabulaError } from '../core/errors.js';
import { NOTE_MAX_CHARS, codePointLength } from './note-text.js';
import type { StoreContext } from './context.js';
import { commit } from './writer.js';

export { NOTE_MAX_CHARS } from './note-text.js';

/** Checks a note's text; returns false for '' (which writes nothing). */
export function checkNote(text: unknown): text is string {
  if (typeof text !== 'string') throw new TabulaError('argument/invalid', `note() takes a string, got ${typeof text}.`);
  const length = codePointLength(text);
  if (length > NOTE_MAX_CHARS) {
    throw new TabulaError(
      'note/too-long',
      `A note has at most ${NOTE_MAX_CHARS} characters; this one has ${length}. Shorten it or split it into several notes.`,
    );
  }
  return text !== '';
}

/** Saves a note at once. */
export async function addNote(
  store: StoreContext,
  target: { userId: string; sessionId: string; label: string; life?: string },
  text: string,
  origin: { runId: string | null; scope: string | null },
): Promise<void> {
  if (!checkNote(text)) return;
  await commit(store, target.userId, target.sessionId, `add a note (${target.label})`, async (tx) => {
    tx.existing(target.life);
    await tx.emit('note.add', { text, runId: origin.runId, scope: origin.scope, at: Date.now() });
  });
}
