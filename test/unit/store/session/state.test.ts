import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PrefixContext, isTabulaError } from '../../../../src/index.js';
import { freshTabula, uniqueName } from '../helpers.js';

describe('session state, prefix and clearContext', () => {
  it('starts empty at version 0 and counts up on every save', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const initial = await session.state();
    expect(initial).toMatchObject({ version: 0, summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} });
    const saved = await session.save({ tasks: [{ title: 'book hotel', done: false }], tools: ['search'] });
    expect(saved.version).toBe(1);
    expect(saved.tasks).toEqual([{ title: 'book hotel', done: false }]);
    expect((await session.save({ plan: { mode: 'on' } })).version).toBe(2);
    expect(await session.state()).toMatchObject({ version: 2, tools: ['search'], plan: { mode: 'on' } });
    expect(Object.isFrozen(saved)).toBe(true);
    await tabula.close();
  });

  it('compare-and-set: a stale expectedVersion is rejected and writes nothing', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const { version } = await session.state();
    await session.save({ summary: 'first' }, { expectedVersion: version });
    try {
      await session.save({ summary: 'second' }, { expectedVersion: version });
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'session/conflict')).toBe(true);
      expect((error as Error).message).toMatch(/expected version 0, but the session is at version 1/);
    }
    expect(await session.state()).toMatchObject({ version: 1, summary: 'first' });
    await tabula.close();
  });

  it('onConflict overwrite and merge function', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.save({ tools: ['a'] });
    const overwritten = await session.save({ summary: 'mine' }, { expectedVersion: 0, onConflict: 'overwrite' });
    expect(overwritten).toMatchObject({ version: 2, summary: 'mine', tools: ['a'] });
    const merged = await session.save(
      { tools: ['b'] },
      { expectedVersion: 0, onConflict: (current, patch) => ({ tools: [...current.tools, ...(patch.tools ?? [])] }) },
    );
    expect(merged).toMatchObject({ version: 3, tools: ['a', 'b'] });
    await expect(
      session.save({ tools: [] }, { expectedVersion: 0, onConflict: () => ({ tools: 'oops' }) as never }),
    ).rejects.toMatchObject({ code: 'schema/invalid' });
    expect((await session.state()).version).toBe(3);
    await tabula.close();
  });

  it('refuses unknown fields, non-JSON values and a context that breaks the schema', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s', { contextSchema: z.object({ cart: z.array(z.string()).optional() }) });
    await expect(session.save({ colour: 'red' } as never)).rejects.toThrow(/Writable fields: summary, tasks/);
    await expect(session.save({ tasks: { due: new Date() } as never })).rejects.toThrow(/tasks\.due is not JSON/);
    await expect(session.save({ context: { cart: [1] } })).rejects.toThrow(/contextSchema: context\.cart\[0\]/);
    await session.save({ context: { cart: ['apple'] } });
    expect((await session.state()).context).toEqual({ cart: ['apple'] });
    await tabula.close();
  });

  it('sets the prefix and reads it back as a PrefixContext', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    expect((await session.prefix()).equals(new PrefixContext())).toBe(true);
    const prefix = new PrefixContext({ systemPrompt: 'Be kind.', grounding: [{ role: 'user', content: 'doc' }], schemaBlock: 'JSON' });
    await session.setPrefix(prefix);
    expect((await session.prefix()).equals(prefix)).toBe(true);
    await expect(session.setPrefix({ systemPrompt: 'x' } as PrefixContext)).rejects.toMatchObject({ code: 'argument/invalid' });
    await tabula.close();
  });

  it('clearContext drops messages and summary and keeps everything else', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.setPrefix(new PrefixContext({ systemPrompt: 'p' }));
    await session.append([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }]);
    await session.save({ summary: 'sum', tasks: ['t'], plan: 'p', permissions: { allow: ['x'] }, tools: ['g'] });
    await session.journal.record('j');
    await session.note('n');
    await session.memory().set('m', 1);
    await session.clearContext();
    expect(await session.messages()).toEqual([]);
    expect(await session.messageCount()).toBe(0);
    expect(await session.state()).toMatchObject({ summary: null, tasks: ['t'], plan: 'p', permissions: { allow: ['x'] }, tools: ['g'] });
    expect((await session.prefix()).systemPrompt).toBe('p');
    expect(await session.journal.view()).toEqual(['j']);
    expect((await session.notes()).map((n) => n.text)).toEqual(['n']);
    expect(await session.memory().get('m')).toBe(1);
    await session.append({ role: 'user', content: 'fresh start' });
    expect((await session.messages()).map((m) => m.content)).toEqual(['fresh start']);
    await tabula.close();
  });
});

describe('save() conflicts and bad patches (issue 10 #5, #12)', () => {
  it('awaits an async onConflict merge and saves its validated result', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.save({ tools: ['a'] });
    const merged = await session.save(
      { tools: ['b'] },
      {
        expectedVersion: 0,
        onConflict: async (current, patch) => {
          await Promise.resolve();
          return { tools: [...current.tools, ...(patch.tools ?? [])] };
        },
      },
    );
    expect(merged).toMatchObject({ version: 2, tools: ['a', 'b'] });
    await expect(
      session.save({ tools: [] }, { expectedVersion: 0, onConflict: async () => Promise.resolve({ tools: 'oops' } as never) }),
    ).rejects.toMatchObject({ code: 'schema/invalid' });
    await expect(session.save({ tools: [] }, { expectedVersion: 0, onConflict: async () => Promise.resolve(new Map() as never) })).rejects.toMatchObject({
      code: 'argument/invalid',
    });
    expect((await session.state()).version).toBe(2);
    await tabula.close();
  });

  it('a merge that races another save runs again against the newer version', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    await a.save({ tools: ['first'] });
    let calls = 0;
    const result = await a.save(
      { tools: ['mine'] },
      {
        expectedVersion: 0,
        onConflict: async (current, patch) => {
          calls += 1;
          // The first merge is overtaken by another tab's save; the second sees it.
          if (calls === 1) await b.save({ tools: [...current.tools, 'theirs'] });
          return { tools: [...current.tools, ...(patch.tools ?? [])] };
        },
      },
    );
    expect(calls).toBe(2);
    expect(result).toMatchObject({ version: 3, tools: ['first', 'theirs', 'mine'] });
    await tabA.close();
    await tabB.close();
  });

  it('refuses patches that are not plain objects, and bad options even without a conflict', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    for (const bad of [new Map(), new Date(), [], null, 'x', 1]) {
      await expect(session.save(bad as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    }
    await expect(session.save({}, { onConflict: 'merge' as never })).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(session.save({}, { expectedVersion: 0, onConflict: 42 as never })).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(session.save({}, null as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(session.save({}, { expectedVersion: NaN })).rejects.toMatchObject({
      code: 'argument/invalid',
      message: expect.stringMatching(/got NaN/) as string,
    });
    expect((await session.state()).version).toBe(0);
    await tabula.close();
  });

  it('restore() of a missing, undefined or foreign checkpoint says what is wrong', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const other = await tabula.session('other');
    const foreign = await other.checkpoint();
    await expect(session.restore(undefined as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(session.restore(null as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(session.restore('nope')).rejects.toMatchObject({ code: 'checkpoint/not-found' });
    await expect(session.restore(foreign.id)).rejects.toMatchObject({ code: 'checkpoint/not-found' });
    await tabula.close();
  });
});

