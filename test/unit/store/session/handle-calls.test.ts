/**
 * Session calls at their edges: a wrong argument's error names the call and
 * the argument to fix (not just its code); `scope: null` means no scope; a
 * checkpoint belongs to one user's session, not to every session of that
 * name; checkpoints list in the order they were made; save() gives up after
 * its last merge; close() silences the handle's listeners.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { tagged, type Tabula } from '../../../../src/index.js';
import { freshTabula, uniqueName, waitFor } from '../helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});
async function open(options: { name?: string; userId?: string } = {}): Promise<Tabula> {
  const tabula = await freshTabula(options);
  opened.push(tabula);
  return tabula;
}

/** Calls `call` and returns the error it throws or rejects with; fails when it succeeds. */
async function failureOf(call: () => unknown): Promise<{ code: string; message: string; issues?: unknown[] }> {
  try {
    await call();
  } catch (error) {
    return error as { code: string; message: string; issues?: unknown[] };
  }
  throw new Error('expected the call to fail');
}

describe('a wrong argument to a session call', () => {
  it('is refused with argument/invalid and a message naming the call and the argument', async () => {
    const session = await (await open()).session('s');
    const cases: [() => unknown, string][] = [
      [() => session.messages(42 as never), 'messages(options) takes an options object or nothing, got'],
      [() => session.messages({ scope: 'recent' as never }), 'messages({ scope }) takes a scope'],
      [() => session.toContext(42 as never), 'toContext(options) takes an options object or nothing, got'],
      [() => session.journal.apply('entry' as never), 'journal.apply() takes an array of JSON entries.'],
      [() => session.save(1 as never), 'save() takes a plain object of state fields'],
      [() => session.fork('b', 42 as never), 'fork(sessionId, options) takes an options object or nothing, got'],
      [() => session.fork('b', { userId: '' }), 'fork({ userId }) must be a string'],
      [() => session.fork(''), 'fork(sessionId) must be a string'],
      [() => session.checkpoint(42 as never), 'checkpoint(label) takes a string label or nothing.'],
      [() => session.restore(''), 'restore(checkpointId) takes the id of a checkpoint from session.checkpoints(), got'],
      [() => session.subscribe(42 as never), 'subscribe(listener) takes a function, got'],
    ];
    for (const [call, message] of cases) {
      const error = await failureOf(call);
      expect(error.code, message).toBe('argument/invalid');
      expect(error.message).toContain(message);
    }
    expect(await session.checkpoints()).toEqual([]);
    expect((await session.state()).version).toBe(0);
  });

  it('a merge function that returns a bad patch is named as such', async () => {
    const session = await (await open()).session('s');
    await session.save({ tools: ['a'] });
    const error = await failureOf(() => session.save({ tools: ['b'] }, { expectedVersion: 0, onConflict: () => [] as never }));
    expect(error).toMatchObject({ code: 'argument/invalid' });
    expect(error.message).toContain('the onConflict merge function result takes a plain object of state fields');
  });

  it('a journal entry that is not JSON is named by its index and path, with the problem as its one issue', async () => {
    const session = await (await open()).session('s');
    const error = await failureOf(() => session.journal.apply(['fine', { when: new Date(0) } as never]));
    expect(error.code).toBe('schema/invalid');
    expect(error.message).toMatch(/^journal entry \[1\] of session "s" of user "anonymous" is not JSON at when: /);
    expect(error.issues).toEqual([expect.objectContaining({ path: ['when'] })]);
    expect(await session.journal.view()).toEqual([]);
  });
});

describe('messages({ scope: null })', () => {
  it('is no scope: every message, or the last n', async () => {
    const session = await (await open()).session('s');
    await session.append([
      { role: 'user', content: 'a', name: 'x' },
      { role: 'user', content: 'b' },
      { role: 'user', content: 'c', name: 'x' },
    ]);
    const contents = (list: readonly { content: unknown }[]) => list.map((m) => m.content);
    expect(contents(await session.messages({ scope: null as never }))).toEqual(['a', 'b', 'c']);
    expect(contents(await session.messages({ scope: null as never, last: 2 }))).toEqual(['b', 'c']);
    expect(contents(await session.messages({ scope: tagged('x'), last: 1 }))).toEqual(['c']);
  });
});

describe('journal.markCommitted()', () => {
  it('on an empty journal writes and announces nothing; after entries it commits them', async () => {
    const session = await (await open()).session('s');
    const kinds: string[][] = [];
    session.subscribe((change) => kinds.push([...change.kinds]));
    await session.journal.markCommitted();
    expect(await session.journal.diff()).toEqual([]);
    await session.journal.apply(['a', 'b']);
    await session.journal.markCommitted();
    expect(await session.journal.diff()).toEqual([]);
    expect(kinds).toEqual([['journal.append'], ['journal.commit']]);
  });
});

describe('checkpoints', () => {
  it('list in the order they were made, whatever their random ids', async () => {
    const session = await (await open()).session('s');
    const made = [];
    for (let i = 0; i < 8; i++) made.push(await session.checkpoint(`cp${i}`));
    // Stored by id (random); 8 checkpoints come back in the order made only by sorting (1 chance in 40,320 otherwise).
    expect(await session.checkpoints()).toEqual(made);
  });

  it('restore() refuses the checkpoint of another user’s session of the same name, and changes nothing', async () => {
    const name = uniqueName();
    const alice = await (await open({ name, userId: 'alice' })).session('s');
    const bob = await (await open({ name, userId: 'bob' })).session('s');
    await bob.append({ role: 'user', content: 'bob' });
    const bobs = await bob.checkpoint();
    await alice.append({ role: 'user', content: 'alice' });
    const error = await failureOf(() => alice.restore(bobs.id));
    expect(error.code).toBe('checkpoint/not-found');
    expect(error.message).toBe(`session "s" of user "alice" has no checkpoint ${JSON.stringify(bobs.id)}; list them with session.checkpoints().`);
    expect((await alice.messages()).map((m) => m.content)).toEqual(['alice']);
    expect((await alice.state()).version).toBe(0);
  });
});

describe('save() with a merge function, on a session that keeps changing', () => {
  it('runs the merge 8 times, then gives up with session/conflict and writes nothing of its own', async () => {
    const name = uniqueName();
    const mine = await (await open({ name })).session('s');
    const theirs = await (await open({ name })).session('s');
    await theirs.save({ summary: 'theirs 0' });
    let merges = 0;
    const error = await failureOf(() =>
      mine.save(
        { tools: ['mine'] },
        {
          expectedVersion: 0,
          onConflict: async () => {
            merges += 1;
            // Another tab saves while each merge runs, for longer than save() keeps trying.
            if (merges <= 20) await theirs.save({ summary: `theirs ${merges}` });
            return { tools: ['mine'] };
          },
        },
      ),
    );
    expect(merges).toBe(8);
    expect(error.code).toBe('session/conflict');
    expect(error.message).toBe(
      'save() for session "s" of user "anonymous": the session changed again under each of 8 merges (now at version 9). Nothing was written; retry later.',
    );
    expect(await mine.state()).toMatchObject({ version: 9, summary: 'theirs 8', tools: [] });
  });
});

describe('close()', () => {
  it('stops the handle’s listeners; another handle of the session still hears its changes', async () => {
    const tabula = await open();
    const closing = await tabula.session('s');
    const staying = await tabula.session('s');
    const heardByClosed: string[] = [];
    const heardByOpen: string[] = [];
    closing.subscribe((change) => heardByClosed.push(change.kinds.join()));
    await closing.close();
    await closing.close(); // twice is harmless
    staying.subscribe((change) => heardByOpen.push(change.kinds.join()));
    await staying.note('after close');
    await waitFor(() => heardByOpen.length === 1);
    expect(heardByOpen).toEqual(['note.add']);
    expect(heardByClosed).toEqual([]);
  });
});
