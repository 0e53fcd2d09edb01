/**
 * The run coordinator's channel (coordinator.ts) opens on the first run or
 * interrupt, not with openTabula(): a page that only reads never opens it,
 * and interrupts between instances still arrive (runs.test.ts has the rest).
 * An interrupt handled late by the tab that runs stops only the run it was
 * sent to (seeded: the seed is printed, TABULA_SEED replays it).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fcParams } from '../seed.js';
import { freshTabula, uniqueName, waitFor } from './helpers.js';

/** Records the name of every BroadcastChannel opened while it is installed. */
function recordChannels(): string[] {
  const opened: string[] = [];
  const Real = globalThis.BroadcastChannel;
  vi.stubGlobal(
    'BroadcastChannel',
    class extends Real {
      constructor(name: string) {
        super(name);
        opened.push(name);
      }
    },
  );
  return opened;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('run coordinator channel', () => {
  it('is not opened by openTabula, session() or reads; the first run opens it once, and an interrupt from another instance arrives', async () => {
    const opened = recordChannels();
    const name = uniqueName();
    const runs = `tabula:${name}:runs`;
    const reader = await freshTabula({ name });
    const session = await reader.session('s');
    await session.append({ role: 'user', content: 'hi' });
    expect((await session.messages({ last: 50 })).map((m) => m.content)).toEqual(['hi']);
    expect(opened).not.toContain(runs);

    const other = await freshTabula({ name });
    let resolveStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (resolveStarted = resolve));
    const running = session.run(async (ctx) => {
      resolveStarted();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
    });
    const outcome = running.then(() => null, (error: unknown) => error);
    await started;
    expect(opened.filter((channel) => channel === runs)).toHaveLength(1);
    expect(await (await other.session('s')).interrupt('stop')).toBe(true);
    expect(await outcome).toMatchObject({ code: 'run/interrupted' });
    expect(opened.filter((channel) => channel === runs)).toHaveLength(2);
    await session.run(async () => undefined);
    expect(opened.filter((channel) => channel === runs)).toHaveLength(2);
    await reader.close();
    await other.close();
  });
});

/**
 * BroadcastChannel whose interrupt messages wait at the receiving end until released: a loaded tab
 * handles a message late, after the run it was sent to may have ended and the next one begun.
 */
function delayInterrupts(): { held: (() => void)[] } {
  const held: (() => void)[] = [];
  const Real = globalThis.BroadcastChannel;
  vi.stubGlobal(
    'BroadcastChannel',
    class extends Real {
      override set onmessage(handler: ((event: MessageEvent) => void) | null) {
        super.onmessage = handler && ((event: MessageEvent) => {
          const data = event.data as { type?: unknown };
          if (data.type === 'interrupt') held.push(() => handler.call(this, event));
          else handler.call(this, event);
        });
      }
      override get onmessage(): ((event: MessageEvent) => void) | null {
        return super.onmessage;
      }
    },
  );
  return { held };
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((settle) => (resolve = settle));
  return { promise, resolve };
}

describe('interrupt across tabs, delivered late', () => {
  it('stops only the run it was sent to: the next run on the session never sees it', async () => {
    const { held } = delayInterrupts();
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');

    const firstStarted = deferred<void>();
    const finishFirst = deferred<void>();
    const first = a.run(async () => {
      firstStarted.resolve();
      await finishFirst.promise;
      return 'first done';
    });
    await firstStarted.promise;
    // Tab B stops the first run, but tab A handles the message only after that run has ended.
    const stopped = b.interrupt('stop the first run');
    await waitFor(() => held.length === 1);
    finishFirst.resolve();
    expect(await first).toBe('first done');

    const secondStarted = deferred<AbortSignal>();
    const finishSecond = deferred<void>();
    const second = a.run(async (ctx) => {
      secondStarted.resolve(ctx.signal);
      await Promise.race([finishSecond.promise, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
      return 'second done';
    });
    const outcome = second.then((value) => value, (error: unknown) => error);
    const signal = await secondStarted.promise;
    held.shift()?.();
    // The handler runs synchronously: had it aborted the second run, the signal would say so now.
    expect(signal.aborted).toBe(false);
    // Nobody acknowledged: the run it named had ended, so interrupt() reports nothing stopped.
    expect(await stopped).toBe(false);

    // An interrupt sent while the second run holds the session still stops it.
    const stopSecond = b.interrupt('stop the second run');
    await waitFor(() => held.length === 1);
    held.shift()?.();
    expect(await stopSecond).toBe(true);
    expect(await outcome).toMatchObject({ code: 'run/interrupted' });
    expect((await outcome as Error).message).toMatch(/stop the second run/);
    expect((await a.runs()).map((run) => run.status)).toEqual(['succeeded', 'interrupted']);
    await tabA.close();
    await tabB.close();
  });
});

type Step = 'start' | 'end' | 'interrupt' | 'deliver';

describe('interrupts across tabs, delivered in any order relative to runs (property)', () => {
  it('a delivered interrupt stops the run it was sent to if that run is still in flight, and no other run', { timeout: 120_000 }, async () => {
    const { held } = delayInterrupts();
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom<Step>('start', 'end', 'interrupt', 'interrupt', 'deliver', 'deliver'), { minLength: 6, maxLength: 30 }), async (steps) => {
        held.length = 0;
        const name = uniqueName('late-interrupt');
        const tabA = await freshTabula({ name });
        const tabB = await freshTabula({ name });
        const a = await tabA.session('s');
        const b = await tabB.session('s');
        interface InFlight { runId: string; signal: AbortSignal; end: () => void; outcome: Promise<unknown> }
        let current: InFlight | null = null;
        /** The run each held message was sent to, oldest first, like `held`. */
        const targets: string[] = [];
        const replies: Promise<boolean>[] = [];
        try {
          for (const step of steps) {
            if (step === 'start' && current === null) {
              const started = deferred<{ runId: string; signal: AbortSignal }>();
              const end = deferred<void>();
              const outcome = a
                .run(async (ctx) => {
                  started.resolve({ runId: ctx.runId, signal: ctx.signal });
                  await Promise.race([end.promise, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
                })
                .then(() => 'ended', (error: unknown) => error);
              current = { ...(await started.promise), end: () => end.resolve(), outcome };
            } else if (step === 'end' && current !== null) {
              current.end();
              expect(await current.outcome).toBe('ended');
              current = null;
            } else if (step === 'interrupt') {
              const before = held.length;
              const reply = b.interrupt('stop');
              if (current === null) {
                expect(await reply).toBe(false);
              } else {
                replies.push(reply);
                await waitFor(() => held.length > before);
                targets.push(current.runId);
              }
            } else if (step === 'deliver' && held.length > 0) {
              const target = targets.shift();
              held.shift()?.();
              if (current !== null) {
                // The handler runs synchronously: the abort, if any, has happened.
                expect(current.signal.aborted).toBe(target === current.runId);
                if (current.signal.aborted) {
                  expect(await current.outcome).toMatchObject({ code: 'run/interrupted' });
                  current = null;
                }
              }
            }
          }
          current?.end();
          if (current) await current.outcome;
        } finally {
          // Closing settles the interrupts nobody acknowledged (false) without waiting for their timeout.
          await tabA.close();
          await tabB.close();
          await Promise.all(replies);
        }
      }),
      fcParams(200),
    );
  });
});
