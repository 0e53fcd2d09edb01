/**
 * session.run() (runs.ts) in the details runs.test.ts leaves out: what each
 * refusal says, what a run reads and buffers (copies, not shared objects),
 * what a run without context changes writes (no state save), the reason an
 * interrupt carries, a retried runId keeping its scope, the run rows a crashed
 * tab left, and runs() as read back.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { isTabulaError, type RunContext } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, uniqueName } from './helpers.js';

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** The TabulaError a call rejects with (fails the test otherwise). */
async function rejection(promise: Promise<unknown>): Promise<Error & { code: string; cause?: unknown }> {
  const outcome: unknown = await promise.then(
    () => new Error('resolved'),
    (error: unknown) => error,
  );
  if (!isTabulaError(outcome)) throw new Error(`expected a TabulaError, got ${String(outcome)}`);
  return outcome;
}

describe('run() refuses bad arguments, saying what it takes', () => {
  it('fn, runId, signal, wait, scope', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const refusals: [Promise<unknown>, RegExp][] = [
      [session.run('not a function' as never), /^run\(fn\) takes an async function \(ctx\) => result\.$/],
      [session.run(async () => 1, { runId: '' }), /^A runId must be a non-blank string of at most 128 characters, got /],
      [session.run(async () => 1, { runId: 'r'.repeat(129) }), /^A runId must be a non-blank string/],
      [session.run(async () => 1, { runId: 7 as never }), /^A runId must be a non-blank string/],
      [session.run(async () => 1, { signal: { aborted: 'no' } as never }), /^run\(fn, \{ signal \}\) takes an AbortSignal, got /],
      [session.run(async () => 1, { signal: null as never }), /^run\(fn, \{ signal \}\) takes an AbortSignal, got null/],
      [session.run(async () => 1, { signal: { addEventListener: () => undefined } as never }), /^run\(fn, \{ signal \}\) takes an AbortSignal, got /],
      [session.run(async () => 1, 5 as never), /^run\(fn, options\) takes an options object or nothing, got /],
      [session.run(async () => 1, { wait: 'yes' as never }), /^run\(fn, \{ wait \}\) takes true or false, got /],
      [session.run(async () => 1, { scope: '' }), /^A memory scope must be a string of 1–128 characters/],
    ];
    for (const [call, message] of refusals) {
      const error = await rejection(call);
      expect(error.code).toBe('argument/invalid');
      expect(error.message).toMatch(message);
    }
    const interrupt = await rejection(session.interrupt(5 as never));
    expect(interrupt).toMatchObject({ code: 'argument/invalid', message: 'interrupt(reason) takes a string reason or nothing.' });
    expect(await session.runs()).toEqual([]);
    // The longest runId is kept as is.
    expect(await session.run(async (ctx) => ctx.runId, { runId: 'r'.repeat(128) })).toBe('r'.repeat(128));
    await tabula.close();
  });

  it('accepts a signal from another realm or library: anything with aborted and addEventListener', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const controller = new AbortController();
    // Not an instance of this realm's AbortSignal, but shaped like one.
    const foreign = {
      get aborted() {
        return controller.signal.aborted;
      },
      get reason(): unknown {
        return controller.signal.reason as unknown;
      },
      addEventListener: (type: string, listener: () => void, options?: AddEventListenerOptions) => controller.signal.addEventListener(type, listener, options),
      removeEventListener: (type: string, listener: () => void) => controller.signal.removeEventListener(type, listener),
    };
    const outcome = session
      .run(
        async (ctx) => {
          const aborted = new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          controller.abort('foreign stop');
          await aborted;
        },
        { signal: foreign as unknown as AbortSignal },
      )
      .then(() => null, (error: unknown) => error);
    expect(await outcome).toMatchObject({ code: 'run/interrupted', message: expect.stringMatching(/was interrupted: foreign stop; its context changes were dropped\.$/) as unknown });
    await tabula.close();
  });

  it('a signal aborted before the call: run/interrupted with the signal’s reason as cause, and no run row', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const controller = new AbortController();
    const reason = new Error('gave up');
    controller.abort(reason);
    const error = await rejection(session.run(async () => 1, { signal: controller.signal, runId: 'r1' }));
    expect(error).toMatchObject({ code: 'run/interrupted', message: 'Run r1 was not started: its signal is already aborted.' });
    expect(error.cause).toBe(reason);
    expect(await session.runs()).toEqual([]);
    await tabula.close();
  });
});

describe('what a run says when it is interrupted', () => {
  it('interrupt(reason) names the reason; interrupt() none; a signal aborted without a string reason says the caller aborted it', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const runUntilAborted = (stop: (ctx: RunContext) => Promise<unknown> | void, signal?: AbortSignal) =>
      session
        .run(
          async (ctx) => {
            const aborted = new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
            await stop(ctx);
            await aborted;
          },
          { runId: 'r', ...(signal ? { signal } : {}) },
        )
        .then(() => null, (error: unknown) => error as Error);
    const withReason = await runUntilAborted(() => void session.interrupt('user pressed stop'));
    expect(withReason?.message).toBe('Run r on session "s" of user "anonymous" was interrupted: user pressed stop; its context changes were dropped.');
    const withoutReason = await runUntilAborted(() => void session.interrupt());
    expect(withoutReason?.message).toBe('Run r on session "s" of user "anonymous" was interrupted; its context changes were dropped.');
    const controller = new AbortController();
    const bySignal = await runUntilAborted(() => controller.abort(new Error('not a string')), controller.signal);
    expect(bySignal?.message).toBe('Run r on session "s" of user "anonymous" was interrupted: the caller aborted it; its context changes were dropped.');
    // The signal of the run carries the same kind of error.
    let signalReason: unknown;
    await runUntilAborted((ctx) => {
      ctx.signal.addEventListener('abort', () => (signalReason = ctx.signal.reason as unknown));
      void session.interrupt('why');
    });
    expect(signalReason).toMatchObject({ code: 'run/interrupted', message: expect.stringMatching(/was interrupted: why\.$/) as unknown });
    await tabula.close();
  });

  it('a second interrupt of the same run changes nothing: the first reason stands', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const outcome = session
      .run(
        async (ctx) => {
          const aborted = new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          expect(await session.interrupt('first')).toBe(true);
          expect(await session.interrupt('second')).toBe(true);
          await aborted;
        },
        { runId: 'r' },
      )
      .then(() => null, (error: unknown) => error as Error);
    expect((await outcome)?.message).toBe('Run r on session "s" of user "anonymous" was interrupted: first; its context changes were dropped.');
    await tabula.close();
  });

  it('a fn that returns normally after an interrupt still fails as interrupted and saves no context', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const error = await rejection(
      session.run(async (ctx) => {
        ctx.set('k', 1);
        await session.interrupt('late');
        return 'finished anyway';
      }),
    );
    expect(error.code).toBe('run/interrupted');
    expect((await session.state()).context).toEqual({});
    expect((await session.runs()).map((run) => run.status)).toEqual(['interrupted']);
    await tabula.close();
  });
});

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

describe('interrupt() of a run in another tab', () => {
  it('names the run in flight, so the other tab stops it; a finished session answers false', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    const started = deferred();
    const outcome = a
      .run(
        async (ctx) => {
          started.resolve();
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        },
        { runId: 'remote-run' },
      )
      .then(() => null, (error: unknown) => error as Error);
    await started.promise;
    expect(await b.interrupt('from B')).toBe(true);
    expect((await outcome)?.message).toBe('Run remote-run on session "s" of user "anonymous" was interrupted: from B; its context changes were dropped.');
    expect(await b.interrupt('again')).toBe(false);
    await Promise.all([tabA.close(), tabB.close()]);
  });
});

describe('close() with a run in flight', () => {
  it('interrupts the run: a fn that follows ctx.signal ends, the run rejects as closed, and another tab runs the session', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const a = await tabA.session('s');
    const started = deferred();
    let signal: AbortSignal | null = null;
    const outcome = a
      .run(
        async (ctx) => {
          signal = ctx.signal;
          started.resolve();
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          throw ctx.signal.reason;
        },
        { runId: 'closing-run' },
      )
      .then(() => null, (error: unknown) => error);
    await started.promise;
    await tabA.close();
    expect(signal!.aborted).toBe(true);
    const error = await outcome;
    // Its end cannot be written: the run says the Tabula is closed, and its row is left as a crashed tab leaves one.
    expect(isTabulaError(error) && error.code).toBe('storage/closed');
    expect((error as Error).message).toMatch(/ is closed; open it again with openTabula\(\)\.$/);
    // The lock is free: another tab runs the session without waiting.
    const tabB = await freshTabula({ name });
    const b = await tabB.session('s');
    expect(await b.run(async () => 'ran', { wait: false, runId: 'next-run' })).toBe('ran');
    expect((await b.runs()).map((run) => [run.runId, run.status])).toEqual([
      ['closing-run', 'abandoned'],
      ['next-run', 'succeeded'],
    ]);
    await tabB.close();
  });
});

describe('the nesting check', () => {
  it('leaves Error.stackTraceLimit as it found it', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const limit = Error.stackTraceLimit;
    await expect(
      session.run(async () => {
        await Promise.resolve();
        return session.run(async () => 'inner');
      }),
    ).rejects.toMatchObject({ code: 'run/nested' });
    expect(Error.stackTraceLimit).toBe(limit);
    await tabula.close();
  });
});

describe('more of what runs say', () => {
  it('a runId of another user’s session is refused too, by name', async () => {
    const alice = await freshTabula({ userId: 'alice' });
    const bob = await freshTabula({ userId: 'bob', name: alice.dbName });
    await (await alice.session('s')).run(async () => 1, { runId: 'shared' });
    const error = await rejection((await bob.session('s')).run(async () => 1, { runId: 'shared' }));
    expect(error).toMatchObject({
      code: 'argument/invalid',
      message: 'runId "shared" already belongs to another session; give each session\'s runs their own ids.',
    });
    await Promise.all([alice.close(), bob.close()]);
  });

  it('a nested run, a busy session, a context that breaks the schema, an abort while queued: each says what to do', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s', { contextSchema: z.object({ n: z.number().optional() }) });
    const nested = await rejection(session.run(async () => session.run(async () => 1)));
    expect(nested.message).toBe(
      'run() was called from inside a run of session "s" of user "anonymous"; runs of one session do not nest (the inner one would wait for the outer one forever). ' +
        'Do the work in the outer run through its ctx, or start the second run after the first has finished.',
    );
    const rolledBack = await rejection(
      session.run(
        async (ctx) => {
          ctx.set('n', 'ten');
        },
        { runId: 'r' },
      ),
    );
    expect(rolledBack.message).toMatch(/^Run r was rolled back: its context changes does not match the session's contextSchema: /);
    expect(rolledBack.message).toMatch(/ Nothing of its context was saved; notes, memory and messages stay\.$/);

    const started = deferred();
    const release = deferred();
    const first = session.run(async () => {
      started.resolve();
      await release.promise;
    });
    await started.promise;
    const busy = await rejection(session.run(async () => 1, { wait: false }));
    expect(busy.message).toBe(
      'Another run holds session "s" of user "anonymous" (in this tab or another); wait for it, interrupt() it, or call run() without wait: false to queue.',
    );
    const controller = new AbortController();
    const queued = session.run(async () => 1, { signal: controller.signal, runId: 'q' });
    const abortError = new DOMException('stop waiting', 'AbortError');
    controller.abort(abortError);
    const aborted = await rejection(queued);
    expect(aborted.message).toBe('Run q was not started: its signal aborted while it waited for session "s" of user "anonymous".');
    expect(aborted.cause).toBe(abortError);
    release.resolve();
    await first;
    await tabula.close();
  });

  it('the signal of a run interrupted without a reason says just that', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let reason: unknown;
    await session
      .run(
        async (ctx) => {
          const aborted = new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          void session.interrupt();
          await aborted;
          reason = ctx.signal.reason as unknown;
        },
        { runId: 'r' },
      )
      .catch(() => undefined);
    expect(reason).toMatchObject({ code: 'run/interrupted', message: 'Run r on session "s" of user "anonymous" was interrupted.' });
    await tabula.close();
  });

  it('the ctx of a run that failed is stale at once: nothing written through it lands', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let leaked!: RunContext;
    await expect(
      session.run(async (ctx) => {
        leaked = ctx;
        throw new Error('failed');
      }),
    ).rejects.toThrow('failed');
    expect(await rejection(leaked.note('after the failure'))).toMatchObject({ code: 'run/stale' });
    expect(await session.notes()).toEqual([]);
    await tabula.close();
  });
});

describe('a failed disk', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('is reported as the start or the end of the run that met it', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const failPuts = () => {
      for (const name of ['put', 'add'] as const) {
        vi.spyOn(IDBObjectStore.prototype, name).mockImplementation(() => {
          throw new DOMException('disk on fire', 'UnknownError');
        });
      }
    };
    failPuts();
    const atStart = await rejection(session.run(async () => 1, { runId: 'r1' }));
    expect(atStart.code).toBe('storage/failed');
    expect(atStart.message).toMatch(/^Could not start run r1 \(session "s" of user "anonymous"\): /);
    vi.restoreAllMocks();
    const atEnd = await rejection(session.run(async () => failPuts(), { runId: 'r2' }));
    expect(atEnd.code).toBe('storage/failed');
    expect(atEnd.message).toMatch(/^Could not finish run r2 \(session "s" of user "anonymous"\): /);
    vi.restoreAllMocks();
    expect(await session.run(async () => 'works again')).toBe('works again');
    await tabula.close();
  });
});
