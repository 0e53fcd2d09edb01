/**
 * What a run records and what its ctx reads and writes (src/store/runs.ts): ctx.get() gives copies of
 * the stored and buffered context, ctx.set() refuses what is not a key and a JSON value, a run without
 * context changes saves no state, ctx.memory, ctx.note() and ctx.append() write in the run's scope; a
 * retried runId keeps its scope and visit, runs() lists oldest first, and a row a crashed tab left
 * running, or a run whose success could not be saved, is not left running.
 */
import { describe, expect, it } from 'vitest';
import { isTabulaError, type RunContext } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, uniqueName } from './helpers.js';

/** The TabulaError a call rejects with (fails the test otherwise). */
async function rejection(promise: Promise<unknown>): Promise<Error & { code: string; cause?: unknown }> {
  const outcome: unknown = await promise.then(
    () => new Error('resolved'),
    (error: unknown) => error,
  );
  if (!isTabulaError(outcome)) throw new Error(`expected a TabulaError, got ${String(outcome)}`);
  return outcome;
}

describe('what a run reads and writes', () => {
  it('ctx.get() gives copies of the stored and of the buffered context, and undefined for a key never set', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.save({ context: { list: [1] } });
    await session.run(async (ctx) => {
      expect(ctx.get('missing')).toBeUndefined();
      (ctx.get('list') as number[]).push(2);
      expect(ctx.get('list')).toEqual([1]);
      const value = { n: 1 };
      ctx.set('obj', value);
      value.n = 99;
      (ctx.get('obj') as { n: number }).n = 42;
      expect(ctx.get('obj')).toEqual({ n: 1 });
    });
    expect((await session.state()).context).toEqual({ list: [1], obj: { n: 1 } });
    await tabula.close();
  });

  it('ctx.set() refuses an empty or non-string key, a __proto__ key and a non-JSON value, naming the run', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.run(
      async (ctx) => {
        for (const key of ['', 3]) {
          expect(() => ctx.set(key as string, 1)).toThrow(expect.objectContaining({ code: 'argument/invalid', message: 'ctx.set(key, value) takes a non-empty string key.' }) as Error);
        }
        expect(() => ctx.set('__proto__', 1)).toThrow(expect.objectContaining({ code: 'schema/invalid', message: expect.stringMatching(/^run r context key: /) as unknown }) as Error);
        expect(() => ctx.set('k', (() => 1) as never)).toThrow(expect.objectContaining({ message: expect.stringContaining('run r context key "k"') as unknown }) as Error);
      },
      { runId: 'r' },
    );
    expect((await session.state()).context).toEqual({});
    await tabula.close();
  });

  it('a run without context changes saves no state (the version stays); one with changes saves once', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.save({ summary: 'kept' });
    await session.run(async (ctx) => ctx.get('anything'));
    expect(await session.state()).toMatchObject({ version: 1, summary: 'kept', context: {} });
    await session.run(async (ctx) => {
      ctx.set('a', 1);
      ctx.set('b', 2);
    });
    expect(await session.state()).toMatchObject({ version: 2, summary: 'kept', context: { a: 1, b: 2 } });
    await tabula.close();
  });

  it('ctx.memory reads and writes the run’s scope, and every write through it after the run is run/stale', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.memory('coding').set('seen', 1);
    let leaked!: RunContext;
    await session.run(
      async (ctx) => {
        leaked = ctx;
        expect(await ctx.memory.get('seen')).toBe(1);
        await ctx.memory.set('two', 2);
        await ctx.memory.delete('seen');
        expect(await ctx.memory.keys()).toEqual(['two']);
        expect(await ctx.memory.transact(async (tx) => tx.keys())).toEqual(['two']);
        await ctx.memory.clear();
        await ctx.memory.set('left', 3);
      },
      { scope: 'coding', runId: 'r' },
    );
    expect(await session.memory('coding').keys()).toEqual(['left']);
    // Reads still work after the run; writes are refused by name.
    expect(await leaked.memory.get('left')).toBe(3);
    expect(await leaked.memory.keys()).toEqual(['left']);
    const stale: [Promise<unknown>, string][] = [
      [leaked.memory.set('x', 1), 'memory.set("x")'],
      [leaked.memory.delete('left'), 'memory.delete("left")'],
      [leaked.memory.clear(), 'memory.clear()'],
      [leaked.memory.transact(async () => 1), 'memory.transact()'],
      [leaked.note('late'), 'a note'],
      [leaked.append({ role: 'user', content: 'late' }), 'an append'],
    ];
    for (const [call, what] of stale) {
      expect(await rejection(call)).toMatchObject({
        code: 'run/stale',
        message: `Run r has ended; ${what} through its context is refused. Start a new run to write.`,
      });
    }
    expect(() => leaked.set('k', 1)).toThrow('Run r has ended; set("k") through its context is refused.');
    expect(await session.memory('coding').keys()).toEqual(['left']);
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });

  it('ctx.note() is stamped with the run and its scope; ctx.append() returns the messages as stored', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const appended = await session.run(
      async (ctx) => {
        await ctx.note('step');
        return ctx.append([{ role: 'user', content: 'q' }]);
      },
      { runId: 'r', scope: 'coding' },
    );
    expect((await session.notes()).map(({ text, runId, scope }) => ({ text, runId, scope }))).toEqual([{ text: 'step', runId: 'r', scope: 'coding' }]);
    expect(appended).toEqual(await session.messages());
    await tabula.close();
  });
});
describe('run rows', () => {
  it('a retried runId keeps its first scope and visit, counts its attempts, and lists once', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.run(async () => 1, { scope: 'coding' });
    await expect(session.run(async () => Promise.reject(new Error('flaky')), { scope: 'coding', runId: 'job' })).rejects.toThrow('flaky');
    const retry = await session.run(async (ctx) => ({ scope: ctx.scope, visit: ctx.visit, attempt: ctx.attempt }), { scope: 'other', runId: 'job' });
    expect(retry).toEqual({ scope: 'coding', visit: 2, attempt: 2 });
    const runs = await session.runs();
    expect(runs.map(({ runId, scope, visit, attempt, status }) => ({ runId: runId === 'job' ? 'job' : 'first', scope, visit, attempt, status }))).toEqual([
      { runId: 'first', scope: 'coding', visit: 1, attempt: 1, status: 'succeeded' },
      { runId: 'job', scope: 'coding', visit: 2, attempt: 2, status: 'succeeded' },
    ]);
    expect(Object.isFrozen(runs[0])).toBe(true);
    expect(Object.keys(runs[0]!).sort()).toEqual(['attempt', 'endedAt', 'runId', 'scope', 'startedAt', 'status', 'visit']);
    await tabula.close();
  });

  it('runs() lists oldest first whatever the order of their ids, and only this session’s', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    await tabula.session('t');
    const raw = createDb(name);
    const row = { userId: 'anonymous', sessionId: 's', scope: 'default', visit: 1, attempt: 1, status: 'succeeded' as const };
    await raw.runs.bulkPut([
      { ...row, runId: 'a-newest', startedAt: 30, endedAt: 31 },
      { ...row, runId: 'b-oldest', startedAt: 10, endedAt: 11, scope: 'zeta' },
      { ...row, runId: 'c-middle', startedAt: 20, endedAt: 21, scope: 'Alpha' },
      { ...row, runId: 'd-other', startedAt: 5, endedAt: 6, sessionId: 't' },
    ]);
    raw.close();
    expect((await session.runs()).map((run) => run.runId)).toEqual(['b-oldest', 'c-middle', 'a-newest']);
    await tabula.close();
  });

  it('a row left running by a crashed tab is marked abandoned by the next run, keeping an end time it had', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    const raw = createDb(name);
    const left = { userId: 'anonymous', sessionId: 's', scope: 'default', visit: 1, attempt: 1, status: 'running' as const, startedAt: 1 };
    await raw.runs.bulkPut([
      { ...left, runId: 'ended-at-7', endedAt: 7 },
      { ...left, runId: 'no-end', endedAt: null, startedAt: 2 },
    ]);
    raw.close();
    const before = Date.now();
    expect(await session.run(async (ctx) => ctx.visit)).toBe(3);
    const runs = await session.runs();
    expect(runs.slice(0, 2).map(({ runId, status }) => [runId, status])).toEqual([
      ['ended-at-7', 'abandoned'],
      ['no-end', 'abandoned'],
    ]);
    expect(runs[0]!.endedAt).toBe(7);
    expect(runs[1]!.endedAt).toBeGreaterThanOrEqual(before);
    await tabula.close();
  });

  it('a run whose success cannot be saved is recorded as failed, not left running', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    // The session is deleted and re-created: the run's success has no session to land in.
    await expect(
      session.run(async () => {
        await tabula.deleteSession('s');
        await tabula.session('s');
      }),
    ).rejects.toMatchObject({ code: 'session/not-found' });
    const again = await tabula.session('s');
    expect(await again.runs()).toEqual([]);
    expect(await again.run(async () => 'usable', { wait: false })).toBe('usable');
    await tabula.close();
  });
});
