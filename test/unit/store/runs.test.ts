import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isTabulaError, type RunContext } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, uniqueName } from './helpers.js';

const later = (ms = 5) => new Promise((resolve) => setTimeout(resolve, ms));

describe('session.run', () => {
  it('commits the buffered context with success, and gives runId, scope, visit, attempt', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const seen: Partial<RunContext>[] = [];
    const result = await session.run(async (ctx) => {
      seen.push({ runId: ctx.runId, scope: ctx.scope, visit: ctx.visit, attempt: ctx.attempt, userId: ctx.userId, sessionId: ctx.sessionId });
      ctx.set('cart', ['apple']);
      expect(ctx.get('cart')).toEqual(['apple']);
      expect((await session.state()).context).toEqual({}); // buffered, not yet saved
      return 'ok';
    });
    expect(result).toBe('ok');
    expect(seen[0]).toMatchObject({ scope: 'default', visit: 1, attempt: 1, userId: 'anonymous', sessionId: 's' });
    expect(seen[0]!.runId).toMatch(/^[0-9a-f]{32}$/);
    expect(await session.state()).toMatchObject({ version: 1, context: { cart: ['apple'] } });
    const [run] = await session.runs();
    expect(run).toMatchObject({ runId: seen[0]!.runId, status: 'succeeded', visit: 1, attempt: 1 });
    expect(run!.endedAt).toBeGreaterThanOrEqual(run!.startedAt);
    await tabula.close();
  });

  it('drops the context when fn throws, keeps notes, memory and messages, and rethrows', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const boom = new Error('model call failed');
    await expect(
      session.run(async (ctx) => {
        ctx.set('step', 'half-done');
        await ctx.note('calling the model');
        await ctx.memory.set('provider-session', 'abc');
        await ctx.append({ role: 'user', content: 'question' });
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect((await session.state()).context).toEqual({});
    expect((await session.notes()).map((n) => [n.text, n.scope])).toEqual([['calling the model', 'default']]);
    expect((await session.notes())[0]!.runId).toMatch(/^[0-9a-f]{32}$/);
    expect(await session.memory('default').get('provider-session')).toBe('abc');
    expect(await session.messageCount()).toBe(1);
    expect((await session.runs())[0]!.status).toBe('failed');
    await tabula.close();
  });

  it('a contextSchema violation rejects the run, names the field and saves none of its context', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s', { contextSchema: z.object({ total: z.number().optional(), items: z.array(z.string()).optional() }) });
    try {
      await session.run(async (ctx) => {
        ctx.set('items', ['a']);
        ctx.set('total', 'ten');
        await ctx.note('kept');
      });
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toMatch(/context\.total/);
    }
    expect((await session.state()).context).toEqual({});
    expect((await session.notes()).map((n) => n.text)).toEqual(['kept']);
    expect((await session.runs())[0]!.status).toBe('failed');
    await tabula.close();
  });

  it('writes through a context after its run ended throw run/stale', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let leaked: RunContext | null = null;
    await session.run(async (ctx) => {
      leaked = ctx;
    });
    const ctx = leaked as unknown as RunContext;
    expect(() => ctx.set('k', 1)).toThrow(expect.objectContaining({ code: 'run/stale' }) as Error);
    await expect(ctx.note('late')).rejects.toMatchObject({ code: 'run/stale' });
    await expect(ctx.memory.set('k', 1)).rejects.toMatchObject({ code: 'run/stale' });
    await expect(ctx.append({ role: 'user', content: 'late' })).rejects.toMatchObject({ code: 'run/stale' });
    expect(await session.notes()).toEqual([]);
    await tabula.close();
  });

  it('counts visits per scope and attempts per runId', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const visits = async (scope: string, runId?: string) => session.run(async (ctx) => [ctx.visit, ctx.attempt], { scope, ...(runId ? { runId } : {}) });
    expect(await visits('coding')).toEqual([1, 1]);
    expect(await visits('coding')).toEqual([2, 1]);
    expect(await visits('testing')).toEqual([1, 1]);
    await expect(session.run(async () => Promise.reject(new Error('flaky')), { scope: 'coding', runId: 'ticket-7' })).rejects.toThrow('flaky');
    expect(await visits('coding', 'ticket-7')).toEqual([3, 2]);
    const runIds = (await session.runs()).map((r) => r.runId);
    expect(runIds).toContain('ticket-7');
    await expect(session.run(async () => 1, { runId: '  ' })).rejects.toMatchObject({ code: 'argument/invalid' });
    const other = await tabula.session('other');
    await expect(other.run(async () => 1, { runId: 'ticket-7' })).rejects.toThrow(/already belongs to another session/);
    await tabula.close();
  });

  it('serialises runs of one session and refuses with run/busy when wait is false', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const order: string[] = [];
    let release!: () => void;
    const started = deferred<void>();
    const first = session.run(async () => {
      order.push('first start');
      started.resolve();
      await new Promise<void>((resolve) => (release = resolve));
      order.push('first end');
    });
    await started.promise;
    await expect(session.run(async () => 'never', { wait: false })).rejects.toMatchObject({ code: 'run/busy' });
    const second = session.run(async () => order.push('second'));
    // A run asked for after the second one, on another session, has run to its end: the second had as much
    // time to start, and must not have while the first holds the session.
    const otherSession = await tabula.session('other');
    expect(await otherSession.run(async () => 'parallel', { wait: false })).toBe('parallel');
    expect(order).toEqual(['first start']);
    release();
    await first;
    await second;
    expect(order).toEqual(['first start', 'first end', 'second']);
    await tabula.close();
  });

  it('interrupt() aborts the run in flight, drops its context, keeps what it saved; false when idle', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    expect(await session.interrupt('nothing to stop')).toBe(false);
    const started = deferred<void>();
    const running = session.run(async (ctx) => {
      ctx.set('draft', 'partial');
      await ctx.note('working');
      started.resolve();
      await new Promise((resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)));
    });
    // Capture the outcome now: it may settle before the assertions below attach to it.
    const outcome = running.then(() => null, (error: unknown) => error);
    await started.promise;
    expect(await session.interrupt('user pressed stop')).toBe(true);
    expect(await outcome).toMatchObject({ code: 'run/interrupted' });
    expect((await outcome as Error).message).toMatch(/user pressed stop/);
    expect((await session.state()).context).toEqual({});
    expect((await session.notes()).map((n) => n.text)).toEqual(['working']);
    expect((await session.runs())[0]!.status).toBe('interrupted');
    // Interrupting an idle session affects nothing later.
    expect(await session.interrupt()).toBe(false);
    expect(await session.run(async (ctx) => ctx.signal.aborted)).toBe(false);
    await tabula.close();
  });

  it('interrupt() reaches a run held by another Tabula instance (another tab)', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    const started = deferred<void>();
    const running = a.run(async (ctx) => {
      started.resolve();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      return 'stopped cooperatively';
    });
    // Capture the outcome now: it may settle before the assertions below attach to it.
    const outcome = running.then(() => null, (error: unknown) => error);
    await started.promise;
    await expect(b.run(async () => 1, { wait: false })).rejects.toMatchObject({ code: 'run/busy' });
    expect(await b.interrupt('from tab B')).toBe(true);
    expect(await outcome).toMatchObject({ code: 'run/interrupted' });
    expect(await b.run(async () => 'B runs now')).toBe('B runs now');
    await tabA.close();
    await tabB.close();
  });

  it('the caller’s AbortSignal interrupts like interrupt() does', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const controller = new AbortController();
    const running = session.run(
      async (ctx) => {
        controller.abort('timeout');
        ctx.set('x', 1);
        await later();
      },
      { signal: controller.signal },
    );
    // Capture the outcome now: it may settle before the assertions below attach to it.
    const outcome = running.then(() => null, (error: unknown) => error);
    expect(await outcome).toMatchObject({ code: 'run/interrupted' });
    expect((await session.state()).context).toEqual({});
    await expect(session.run(async () => 1, { signal: controller.signal })).rejects.toMatchObject({ code: 'run/interrupted' });
    await tabula.close();
  });

  it('a run left running by a tab that is gone is marked abandoned on open, and a new run starts at once', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    await tabula.session('s');
    const t = await tabula.session('t');
    // A tab died mid-run: its row still says running, and nobody holds the session's lock.
    const raw = createDb(name);
    const orphan = { userId: 'anonymous', scope: 'default', visit: 1, attempt: 1, status: 'running' as const, startedAt: 1, endedAt: null };
    await raw.runs.bulkPut([{ ...orphan, runId: 'orphan-s', sessionId: 's' }, { ...orphan, runId: 'orphan-t', sessionId: 't' }]);
    raw.close();

    const reopened = await tabula.session('s');
    expect((await reopened.runs())[0]).toMatchObject({ runId: 'orphan-s', status: 'abandoned' });
    // The handle of t was open before the orphan appeared: a new run owns the lock and cleans up as it starts.
    expect((await t.runs())[0]).toMatchObject({ runId: 'orphan-t', status: 'running' });
    expect(await t.run(async (ctx) => ctx.visit)).toBe(2);
    expect((await t.runs()).map((r) => [r.runId, r.status])).toEqual([['orphan-t', 'abandoned'], [expect.any(String), 'succeeded']]);
    await tabula.close();
  });
});

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('session.run when the session is deleted meanwhile (issue 10 #3)', () => {
  it('fails with session/not-found, saves nothing, and a re-created session starts clean at visit 1', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const session = await tabA.session('s');
    let deleted!: () => void;
    let started!: () => void;
    const deletedNow = new Promise<void>((resolve) => (deleted = resolve));
    const startedNow = new Promise<void>((resolve) => (started = resolve));
    const run = session.run(async (ctx) => {
      ctx.set('step', 1);
      started();
      await deletedNow;
      return 'done';
    });
    await startedNow;
    await tabB.deleteSession('s');
    deleted();
    await expect(run).rejects.toMatchObject({ code: 'session/not-found' });

    const again = await tabA.session('s');
    expect(await again.runs()).toEqual([]);
    expect((await again.state()).context).toEqual({});
    expect(await again.run(async (ctx) => ctx.visit)).toBe(1);
    await tabA.close();
    await tabB.close();
  });

  it('its ctx cannot write into a session re-created meanwhile: nothing of the old run reaches the new life', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let recreated!: () => void;
    let started!: () => void;
    const recreatedNow = new Promise<void>((resolve) => (recreated = resolve));
    const startedNow = new Promise<void>((resolve) => (started = resolve));
    const run = session.run(async (ctx) => {
      started();
      await recreatedNow;
      const refused = await Promise.allSettled([ctx.append({ role: 'user', content: 'old life' }), ctx.note('old note'), ctx.memory.set('k', 1)]);
      return refused.map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'written'));
    });
    await startedNow;
    await tabula.deleteSession('s');
    const again = await tabula.session('s');
    recreated();
    await expect(run).rejects.toMatchObject({ code: 'session/not-found' });
    expect(await again.messages()).toEqual([]);
    expect(await again.notes()).toEqual([]);
    expect(await again.memory().keys()).toEqual([]);
    await tabula.close();
  });

  it('a failing run on a deleted session rethrows its own error and leaves no run row behind', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const run = session.run(async () => {
      await tabula.deleteSession('s');
      throw new Error('app failure');
    });
    await expect(run).rejects.toThrow('app failure');
    const again = await tabula.session('s');
    expect(await again.runs()).toEqual([]);
    expect(await again.run(async (ctx) => ctx.visit)).toBe(1);
    await tabula.close();
  });
});

describe('a run nested in a run of the same session (issue 10 #11)', () => {
  it('fails at once with run/nested, called at the start or after awaits, and the session stays usable', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const other = await tabula.session('other');
    await expect(session.run(async () => session.run(async () => 'inner'))).rejects.toMatchObject({ code: 'run/nested' });
    const deep = async (): Promise<string> => {
      await session.note('before');
      return await session.run(async () => 'inner');
    };
    await expect(
      session.run(async (ctx) => {
        await ctx.note('working');
        await Promise.resolve();
        return await deep();
      }),
    ).rejects.toMatchObject({ code: 'run/nested' });
    // Another session nests fine, and later runs of this one are not blocked.
    expect(await session.run(async () => other.run(async () => 'other session'))).toBe('other session');
    expect(await session.run(async () => 'later', { wait: false })).toBe('later');
    await tabula.close();
  });

  it('a run queued from outside (not nested) still waits its turn', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let release!: () => void;
    let started!: () => void;
    const startedNow = new Promise<void>((resolve) => (started = resolve));
    const first = session.run(async () => {
      const released = new Promise<void>((resolve) => (release = resolve));
      started();
      await released;
      return 1;
    });
    await startedNow;
    const second = session.run(async () => 2);
    release();
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    await tabula.close();
  });
});

describe('a queued run aborted through its signal (issue 10 #12)', () => {
  it('rejects with run/interrupted, not a raw AbortError, and never starts', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let release!: () => void;
    let started!: () => void;
    const startedNow = new Promise<void>((resolve) => (started = resolve));
    const first = session.run(async () => {
      const released = new Promise<void>((resolve) => (release = resolve));
      started();
      await released;
    });
    await startedNow;
    const controller = new AbortController();
    let ran = false;
    const queued = session.run(
      async () => {
        ran = true;
      },
      { signal: controller.signal },
    );
    controller.abort();
    await expect(queued).rejects.toMatchObject({ code: 'run/interrupted' });
    release();
    await first;
    expect(ran).toBe(false);
    await tabula.close();
  });
});
