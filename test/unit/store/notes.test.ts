/**
 * Notes through session.note() (src/store/notes.ts, src/store/note-text.ts);
 * the limits themselves are in journal-notes-memory.test.ts. The class of
 * bug this guards: a note that is not a string stored or failing with a
 * storage error instead of saying what was passed; a too-long note refused
 * without saying what to do; a note stamped with the wrong time; an empty
 * note that writes (a change event, an op queued for sync) though it stores
 * nothing.
 */
import { describe, expect, it } from 'vitest';
import { findNoteProblem, codePointLength, NOTE_MAX_CHARS } from '../../../src/store/note-text.js';
import { freshTabula } from './helpers.js';

describe('session.note()', () => {
  it('refuses a text that is not a string with argument/invalid naming its type, and stores nothing', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    for (const [text, type] of [[42, 'number'], [undefined, 'undefined'], [{ text: 'x' }, 'object']] as const) {
      await expect(session.note(text as unknown as string)).rejects.toMatchObject({ code: 'argument/invalid', message: `note() takes a string, got ${type}.` });
    }
    expect(await session.notes()).toEqual([]);
    await tabula.close();
  });

  it('a note over the limit says how long it is and what to do', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await expect(session.note('é'.repeat(612))).rejects.toMatchObject({
      code: 'note/too-long',
      message: 'A note has at most 500 characters; this one has 612. Shorten it or split it into several notes.',
    });
    await tabula.close();
  });

  it('stamps the note with the time it was saved, and an empty one is no write at all', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const changes: string[][] = [];
    const stop = session.subscribe((change) => changes.push([...change.kinds]));
    const before = Date.now();
    await session.note('first');
    const after = Date.now();
    await session.note('');
    await session.note('second');
    stop();
    const notes = await session.notes();
    expect(notes.map((n) => n.text)).toEqual(['first', 'second']);
    expect(notes[0]?.at).toBeGreaterThanOrEqual(before);
    expect(notes[0]?.at).toBeLessThanOrEqual(after);
    // Two writes, two changes: the empty note made none between them.
    expect(changes).toEqual([['note.add'], ['note.add']]);
    await tabula.close();
  });
});

describe('note text limits', () => {
  it('counts code points: an emoji or an accented letter is one, a combining mark another', () => {
    expect(codePointLength('')).toBe(0);
    expect(codePointLength('abc')).toBe(3);
    expect(codePointLength('😀😀')).toBe(2);
    expect(codePointLength('e\u0301')).toBe(2);
  });

  it('finds no problem in 1 to 500 code points; says why for empty or longer text', () => {
    expect(NOTE_MAX_CHARS).toBe(500);
    expect(findNoteProblem('x')).toBeNull();
    expect(findNoteProblem('😀'.repeat(500))).toBeNull();
    expect(findNoteProblem('')).toBe('a note cannot be empty (note("") stores nothing)');
    expect(findNoteProblem('😀'.repeat(501))).toBe('a note has at most 500 characters; this one has 501');
  });
});
