/**
 * Interrupting a run (src/store/runs.ts, src/store/coordinator.ts): the reason an interrupt carries
 * (interrupt(reason), interrupt(), an aborted signal), a second interrupt leaving the first reason,
 * a fn that returns after an interrupt still failing as interrupted; interrupt() of a run in another
 * tab stopping the run in flight there; close() interrupting a run in flight.
 */
import { describe, expect, it } from 'vitest';
import { isTabulaError, type RunContext } from '../../../src/index.js';
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
