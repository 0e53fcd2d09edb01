/**
 * The session handle's own checks and error texts (src/store/session.ts, its first half): what a
 * refused argument, a conflict, a closed handle or a failed read says, that save() checks state.context
 * only when it is given, what an export carries of memory, and that the handle's blackboard is one board
 * that closes with the handle. Each error is asserted on what it tells the caller: which call, which
 * session, and what to do.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { PrefixContext, TabulaError, isTabulaError } from '../../../../src/core/index.js';
import type { Tabula } from '../../../../src/index.js';
import { createDb } from '../../../../src/store/db/schema.js';
import { failStorage, freshTabula } from '../helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});

async function open(name?: string): Promise<Tabula & { dbName: string }> {
  const tabula = await freshTabula({ userId: 'u', ...(name === undefined ? {} : { name }) });
  opened.push(tabula);
  return tabula;
}

/** The TabulaError a promise rejects with (fails the test when it resolves or rejects with something else). */
async function rejection(promise: Promise<unknown>): Promise<TabulaError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof TabulaError) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

/** The TabulaError `fn` throws synchronously. */
function thrown(fn: () => unknown): TabulaError {
  try {
    fn();
  } catch (error) {
    if (error instanceof TabulaError) return error;
    throw error;
  }
  throw new Error('expected a throw');
}

const LABEL = 'session "s" of user "u"';

describe('refused arguments say what the call takes', () => {
  it('setPrefix() of a look-alike object says to build a PrefixContext, and stores nothing', async () => {
    const session = await (await open()).session('s');
    const error = await rejection(session.setPrefix({ systemPrompt: 'x', grounding: [], schemaBlock: null } as never));
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe('setPrefix() takes a PrefixContext; build one with new PrefixContext({ systemPrompt, grounding }).');
    expect((await session.prefix()).equals(new PrefixContext())).toBe(true);
  });

  it('save() options that are not an object, a negative or fractional expectedVersion, an unknown onConflict', async () => {
    const session = await (await open()).session('s');
    const notObject = await rejection(session.save({ summary: 'x' }, 'overwrite' as never));
    expect(notObject).toMatchObject({ code: 'argument/invalid', message: 'save(patch, options) takes an options object or nothing, got "overwrite".' });
    for (const [bad, shown] of [[-1, '-1'], [1.5, '1.5'], ['0', '"0"']] as const) {
      const error = await rejection(session.save({ summary: 'x' }, { expectedVersion: bad as never }));
      expect(error.code).toBe('argument/invalid');
      expect(error.message).toBe(`save({ expectedVersion }) takes the version number read from state(), got ${shown}.`);
    }
    const policy = await rejection(session.save({ summary: 'x' }, { onConflict: 'merge' as never }));
    expect(policy.code).toBe('argument/invalid');
    expect(policy.message).toMatch(/^save\(\{ onConflict \}\) must be 'reject', 'overwrite' or a merge function, got "merge"\.$/);
    expect((await session.state()).version).toBe(0);
    // The lowest version, 0, is a valid expectation: a fresh session is at it.
    expect((await session.save({ summary: 'first' }, { expectedVersion: 0 })).version).toBe(1);
  });

  it('messages({ last }) refuses anything but a whole number ≥ 0, naming the value', async () => {
    const session = await (await open()).session('s');
    await session.append([{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }]);
    for (const [bad, shown] of [[1.5, '1.5'], [Number.NaN, 'NaN'], [Number.POSITIVE_INFINITY, 'Infinity'], [-1, '-1'], ['1', '"1"']] as const) {
      const error = await rejection(session.messages({ last: bad as never }));
      expect(error.code).toBe('argument/invalid');
      expect(error.message).toBe(`messages({ last }) takes a whole number ≥ 0, got ${shown}.`);
    }
    expect((await session.messages({ last: 1 })).map((m) => m.content)).toEqual(['b']);
  });

  it('save() of a non-object patch lists the writable fields; a non-JSON field and a wrong type carry their issues', async () => {
    const session = await (await open()).session('s');
    const notObject = await rejection(session.save('summary' as never));
    expect(notObject).toMatchObject({
      code: 'argument/invalid',
      message: 'save() takes a plain object of state fields (summary, tasks, plan, permissions, tools, context), got "summary".',
    });
    const notJson = await rejection(session.save({ tasks: [{ due: new Date(0) }] } as never));
    expect(notJson.code).toBe('schema/invalid');
    expect(notJson.message).toMatch(/^save\(\): field tasks\[0\]\.due is not JSON: /);
    expect(notJson.issues).toHaveLength(1);
    expect(notJson.issues?.[0]).toMatchObject({ path: [0, 'due'] });
    const wrongType = await rejection(session.save({ tools: 'oops' } as never));
    expect(wrongType.code).toBe('schema/invalid');
    expect(wrongType.message).toContain(`save() for ${LABEL}: `);
    expect(wrongType.issues?.length).toBeGreaterThan(0);
    expect(wrongType.issues?.[0]).toMatchObject({ path: ['tools'] });
    expect((await session.state()).version).toBe(0);
  });
});

describe('save() and the contextSchema', () => {
  it('a save without context is not checked against the schema; a context that breaks it names the session', async () => {
    const tabula = await open();
    const session = await tabula.session('s', { contextSchema: z.object({ cart: z.array(z.string()) }) });
    // The schema requires `cart`, but this save does not touch the context at all.
    expect((await session.save({ summary: 'only the summary' })).summary).toBe('only the summary');
    const broken = await rejection(session.save({ context: { cart: [1] } }));
    expect(broken.code).toBe('schema/invalid');
    expect(broken.message).toMatch(/^save\(\) for session "s" of user "u": state\.context does not match the session's contextSchema: context\.cart\[0\]/);
    expect((await session.state()).version).toBe(1);
  });
});

describe('conflicts say what happened and what to do', () => {
  it('a stale expectedVersion names both versions and the ways out', async () => {
    const tabula = await open();
    const session = await tabula.session('s');
    await session.save({ summary: 'elsewhere' });
    const error = await rejection(session.save({ summary: 'mine' }, { expectedVersion: 0 }));
    expect(error.code).toBe('session/conflict');
    expect(error.message).toBe(
      `save() for ${LABEL} expected version 0, but the session is at version 1 (saved elsewhere meanwhile). ` +
        'Nothing was written. Read state() again and retry, or pass onConflict: "overwrite" or a merge function.',
    );
    expect((await session.state()).summary).toBe('elsewhere');
  });

  it('a merge that another tab outruns every time gives up after 8 merges, writing nothing', async () => {
    const first = await open();
    const second = await open(first.dbName);
    const mine = await first.session('s');
    const theirs = await second.session('s');
    await theirs.save({ summary: 'theirs 0' });
    let merges = 0;
    const error = await rejection(
      mine.save(
        { summary: 'mine' },
        {
          expectedVersion: 0,
          onConflict: async (current) => {
            merges += 1;
            // The other tab saves again while this merge runs: the merged result is stale once more.
            await theirs.save({ summary: `theirs ${merges}` });
            return { summary: `${current.summary ?? ''} + mine` };
          },
        },
      ),
    );
    expect(merges).toBe(8);
    expect(error.code).toBe('session/conflict');
    expect(error.message).toBe(`save() for ${LABEL}: the session changed again under each of 8 merges (now at version 9). Nothing was written; retry later.`);
    expect(await mine.state()).toMatchObject({ version: 9, summary: 'theirs 8' });
  });
});

describe('a closed handle and a failing disk name the session', () => {
  it('a closed handle says which session and how to get a new handle, while another handle works', async () => {
    const tabula = await open();
    const closed = await tabula.session('s');
    const other = await tabula.session('s');
    await closed.close();
    const error = await rejection(closed.append({ role: 'user', content: 'late' }));
    expect(error).toMatchObject({ code: 'storage/closed', message: `This handle of ${LABEL} is closed; get a new one with tabula.session().` });
    expect(thrown(() => closed.memory()).message).toBe(error.message);
    await other.append({ role: 'user', content: 'fine' });
    expect(await other.messageCount()).toBe(1);
  });

  it('a failed read or write says what it was doing and for which session', async () => {
    const tabula = await open();
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'x' });
    await session.journal.record({ step: 1 });
    failStorage();
    // One call at a time: each rejection is awaited before the next call starts.
    const cases: [() => Promise<unknown>, string][] = [
      [() => session.state(), 'read the session'],
      [() => session.messages(), 'read messages'],
      [() => session.journal.view(), 'read the journal'],
      [() => session.setPrefix(new PrefixContext({ systemPrompt: 'p' })), 'set the prefix'],
    ];
    for (const [call, what] of cases) {
      const error = await rejection(call());
      expect(error.code).toBe('storage/failed');
      // Dexie appends the wrapped error's name and text; the start is ours.
      expect(error.message.slice(0, `Could not ${what} (${LABEL}): `.length)).toBe(`Could not ${what} (${LABEL}): `);
      expect(error.message).toContain('disk on fire');
    }
    vi.restoreAllMocks();
    expect((await session.prefix()).systemPrompt).toBe('');
    expect(await session.journal.view()).toEqual([{ step: 1 }]);
  });
});

describe('export() of memory', () => {
  it('carries every scope of this session, not deleted keys and not another session\'s memory', async () => {
    const tabula = await open();
    const session = await tabula.session('s');
    const other = await tabula.session('other');
    await session.memory().set('kept', 1);
    await session.memory().set('gone', 2);
    await session.memory().delete('gone');
    await session.memory('prefs').set('theme', 'dark');
    await other.memory().set('foreign', 3);
    const { memory } = await session.export();
    const sorted = [...memory].sort((a, b) => `${a.scope}/${a.key}`.localeCompare(`${b.scope}/${b.key}`));
    expect(sorted).toEqual([
      { scope: 'default', key: 'kept', value: 1 },
      { scope: 'prefs', key: 'theme', value: 'dark' },
    ]);
  });

  it('a corrupt memory row fails the export naming its key', async () => {
    const tabula = await open();
    const session = await tabula.session('s');
    await session.memory().set('k', 1);
    const raw = createDb(tabula.dbName);
    await raw.memory.update(['u', 's', 'default', 'k'], { deleted: 'no' as never });
    raw.close();
    const error = await rejection(session.export());
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    expect(error.message).toContain('Row ["u","s","default","k"] of IndexedDB table "memory"');
  });
});

describe('the handle\'s blackboard', () => {
  it('is one board however often it is read, and every reference to it refuses writes once the handle closes', async () => {
    const tabula = await open();
    const session = await tabula.session('s');
    const board = session.blackboard;
    expect(session.blackboard).toBe(board);
    board.set('k', 1);
    await session.blackboard.flushed();
    await session.close();
    expect(thrown(() => board.set('k', 2)).code).toBe('storage/closed');
    const reopened = await tabula.session('s');
    await reopened.blackboard.whenLoaded;
    expect(reopened.blackboard.get('k')).toBe(1);
  });
});
