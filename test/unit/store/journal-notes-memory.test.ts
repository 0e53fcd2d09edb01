import { describe, expect, it } from 'vitest';
import { freshTabula } from './helpers.js';

describe('persisted journal', () => {
  it('records, diffs past the watermark, commits', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.journal.record({ by: 'a', n: 1 });
    await session.journal.apply([{ by: 'b', n: 2 }, { by: 'a', n: 3 }]);
    await session.journal.apply([]);
    expect(await session.journal.diff()).toHaveLength(3);
    await session.journal.markCommitted();
    expect(await session.journal.diff()).toEqual([]);
    await session.journal.record('later');
    expect(await session.journal.diff()).toEqual(['later']);
    expect(await session.journal.view()).toEqual([{ by: 'a', n: 1 }, { by: 'b', n: 2 }, { by: 'a', n: 3 }, 'later']);
    await expect(session.journal.apply([1, { bad: undefined } as never])).rejects.toThrow(/journal entry \[1\].*bad/);
    expect(await session.journal.view()).toHaveLength(4);
    await tabula.close();
  });
});

describe('notes', () => {
  it('saves lines up to 500 characters, ignores empty text, refuses longer', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.note('searching flights');
    await session.note('');
    await session.note('x'.repeat(500));
    await expect(session.note('x'.repeat(501))).rejects.toMatchObject({ code: 'note/too-long' });
    await expect(session.note('x'.repeat(501))).rejects.toThrow(/at most 500 characters; this one has 501/);
    const notes = await session.notes();
    expect(notes.map((n) => n.text.length)).toEqual([17, 500]);
    expect(notes[0]).toMatchObject({ runId: null, scope: null });
    expect(notes[0]!.id).toMatch(/^[0-9a-f]{32}$/);
    await tabula.close();
  });
});

describe('memory', () => {
  it('keeps JSON values per scope, saved at once', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const dev = session.memory('coding');
    const review = session.memory('review');
    await dev.set('provider-session', 'abc');
    await dev.set('attempts', [1, 2]);
    await review.set('provider-session', 'xyz');
    expect(await dev.get('provider-session')).toBe('abc');
    expect(await review.get('provider-session')).toBe('xyz');
    expect(await dev.keys()).toEqual(['attempts', 'provider-session']);
    expect(await session.memory().keys()).toEqual([]);
    await dev.delete('attempts');
    expect(await dev.get('attempts')).toBeUndefined();
    expect(await dev.keys()).toEqual(['provider-session']);
    await dev.set('attempts', 3);
    expect(await dev.get('attempts')).toBe(3);
    await dev.clear();
    expect(await dev.keys()).toEqual([]);
    expect(await review.keys()).toEqual(['provider-session']);
    await tabula.close();
  });

  it('refuses bad keys and values with their own codes', async () => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory();
    await expect(memory.set('', 1)).rejects.toMatchObject({ code: 'memory/bad-key' });
    await expect(memory.set('k'.repeat(129), 1)).rejects.toMatchObject({ code: 'memory/bad-key' });
    await expect(memory.set('k'.repeat(128), 1)).resolves.toBeUndefined();
    await expect(memory.set('k', null)).rejects.toThrow(/cannot be null; use memory.delete\("k"\)/);
    await expect(memory.set('k', undefined as never)).rejects.toMatchObject({ code: 'memory/bad-value' });
    await expect(memory.set('k', { f: () => 1 } as never)).rejects.toMatchObject({ code: 'memory/bad-value' });
    expect(await memory.keys()).toEqual(['k'.repeat(128)]);
    await tabula.close();
  });
});

describe('limits that must hold as TabulaErrors (issue 10 #12, #14)', () => {
  it('20,000-deep nesting in memory.set, save() and journal is schema/invalid or memory/bad-value, never a RangeError', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = { d: deep };
    await expect(session.memory().set('k', deep as never)).rejects.toMatchObject({ code: 'memory/bad-value', message: expect.stringMatching(/nested deeper/) as string });
    await expect(session.save({ tasks: deep as never })).rejects.toMatchObject({ code: 'schema/invalid' });
    await expect(session.journal.record(deep as never)).rejects.toMatchObject({ code: 'schema/invalid' });
    expect(await session.memory().keys()).toEqual([]);
    expect((await session.state()).version).toBe(0);
    await tabula.close();
  });

  it('the 500-character note limit counts code points, not UTF-16 units', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.note('😀'.repeat(500));
    await expect(session.note('😀'.repeat(501))).rejects.toMatchObject({ code: 'note/too-long', message: expect.stringMatching(/this one has 501/) as string });
    expect((await session.notes()).map((n) => [...n.text].length)).toEqual([500]);
    await tabula.close();
  });
});
