/**
 * What session.run() (src/store/runs.ts) refuses and what its errors say, beyond runs.test.ts: each
 * wrong argument (fn, runId, signal, wait, scope) named with what it takes, a signal from another realm
 * accepted, a nested run, a busy session, a context that breaks the schema, a ctx used after its run
 * failed, a failed disk named as the start or the end of the run; and the nesting check leaving
 * Error.stackTraceLimit as it found it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { isTabulaError, type RunContext } from '../../../src/index.js';
import { freshTabula } from './helpers.js';

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
