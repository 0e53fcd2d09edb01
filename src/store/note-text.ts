/**
 * The limits of a note's text, shared by `note()` and imports. Kept apart
 * from notes.ts so the export format does not depend on the write path.
 */

/** The longest note, in characters (Unicode code points: an emoji counts one). */
export const NOTE_MAX_CHARS = 500;

/** The length of `text` in code points. */
export function codePointLength(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

/** Why `text` cannot be a stored note, or null when it can (1–500 code points). */
export function findNoteProblem(text: string): string | null {
  if (text === '') return 'a note cannot be empty (note("") stores nothing)';
  const length = codePointLength(text);
  return length > NOTE_MAX_CHARS ? `a note has at most ${NOTE_MAX_CHARS} characters; this one has ${length}` : null;
}
