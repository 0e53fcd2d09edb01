/**
 * Two Tabula instances on one database name act as two tabs; random API
 * calls from both are interleaved, some of them racing (issue 10,
 * class-wide). After each step: every call either resolved, and what it
 * acknowledged is visible from both tabs, or rejected with a TabulaError;
 * nothing resolved is missing later unless a clear, restore or delete that
 * resolved since removed it; after closing and reopening, everything read
 * the same; a handle taken before a delete writes nothing once the session
 * is created again (issue 26). Seeded: the seed is printed, TABULA_SEED
 * replays it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTabulaError, type Session, type SessionExport, type Tabula } from '../../../src/index.js';
import { fcParams, testSeed } from '../seed.js';
import { freshTabula, uniqueName } from './helpers.js';

type Command =
  | { kind: 'append'; tab: 0 | 1; text: string }
  | { kind: 'stream'; tab: 0 | 1; chunks: string[] }
  | { kind: 'run'; tab: 0 | 1; text: string; value: number }
  | { kind: 'clear'; tab: 0 | 1 }
  | { kind: 'checkpoint'; tab: 0 | 1 }
  | { kind: 'restore'; tab: 0 | 1; pick: number }
  | { kind: 'fork'; tab: 0 | 1 }
  | { kind: 'import'; tab: 0 | 1 }
  | { kind: 'delete'; tab: 0 | 1 }
  | { kind: 'reopen'; tab: 0 | 1 }
  // A stream or a run left open across steps, so that other calls land while it is in flight.
  | { kind: 'streamOpen'; tab: 0 | 1; text: string }
  | { kind: 'streamDone'; tab: 0 | 1 }
  | { kind: 'runOpen'; tab: 0 | 1; value: number }
  | { kind: 'runEnd'; tab: 0 | 1 };

const tabArb = fc.constantFrom(0 as const, 1 as const);
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('append' as const), tab: tabArb, text: fc.string({ maxLength: 6 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('stream' as const), tab: tabArb, chunks: fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('run' as const), tab: tabArb, text: fc.string({ maxLength: 6 }), value: fc.integer() }) },
  fc.record({ kind: fc.constant('clear' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('checkpoint' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('restore' as const), tab: tabArb, pick: fc.nat() }),
  fc.record({ kind: fc.constant('fork' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('import' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('delete' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('reopen' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('streamOpen' as const), tab: tabArb, text: fc.string({ maxLength: 6 }) }),
  fc.record({ kind: fc.constant('streamDone' as const), tab: tabArb }),
  fc.record({ kind: fc.constant('runOpen' as const), tab: tabArb, value: fc.integer() }),
  fc.record({ kind: fc.constant('runEnd' as const), tab: tabArb }),
);
/** A step is one command, or two racing (started together, awaited together). */
const stepArb = fc.oneof({ weight: 3, arbitrary: fc.tuple(commandArb) }, { weight: 1, arbitrary: fc.tuple(commandArb, commandArb) });

interface World {
  tabs: [Tabula, Tabula];
  handles: [Session, Session];
  checkpoints: string[];
  copies: string[];
  /** Message ids acknowledged (append, stream, run resolved) and not removed since, with the step that acknowledged them. */
  acked: Map<string, number>;
  step: number;
  counter: number;
  openStreams: { done(): Promise<{ id: string; content: unknown }>; abort(): Promise<unknown>; text: string }[];
  openRun: { release: () => void; result: Promise<number>; value: number } | null;
  /** Handles taken before a delete that resolved since: their session life has ended (issue 26). */
  ended: Session[];
}

/** What a resolved command acknowledged, and whether it may have removed messages. */
interface Effect {
  messageIds: string[];
  destructive: boolean;
  /** A run that resolved: the context value it committed, to be visible at once. */
  context?: number;
}

async function execute(world: World, command: Command): Promise<Effect> {
  const session = world.handles[command.tab];
  const tabula = world.tabs[command.tab];
  switch (command.kind) {
    case 'append': {
      const stored = await session.append({ role: 'user', content: command.text });
      return { messageIds: stored.map((m) => m.id), destructive: false };
    }
    case 'stream': {
      const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
      for (const chunk of command.chunks) {
        stream.write(chunk);
        await Promise.resolve();
      }
      const done = await stream.done();
      expect(done.content).toBe(command.chunks.join(''));
      return { messageIds: [done.id], destructive: false };
    }
    case 'streamOpen': {
      const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
      stream.write(command.text);
      world.openStreams.push(Object.assign(stream, { text: command.text }));
      return { messageIds: [], destructive: false };
    }
    case 'streamDone': {
      const stream = world.openStreams.shift();
      if (!stream) return { messageIds: [], destructive: false };
      const done = await stream.done();
      expect(done.content).toBe(stream.text);
      return { messageIds: [done.id], destructive: false };
    }
    case 'runOpen': {
      if (world.openRun) return { messageIds: [], destructive: false };
      let release!: () => void;
      let started!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const startedNow = new Promise<void>((resolve) => (started = resolve));
      const result = session.run(async (ctx) => {
        started();
        await gate;
        ctx.set('last', command.value);
        return command.value;
      });
      world.openRun = { release, result, value: command.value };
      // Either the run starts, or it fails to (its session is gone): both end this step.
      await Promise.race([startedNow, result.then(() => undefined)]);
      return { messageIds: [], destructive: false };
    }
    case 'runEnd': {
      const open = world.openRun;
      if (!open) return { messageIds: [], destructive: false };
      world.openRun = null;
      open.release();
      return { messageIds: [], destructive: false, context: await open.result };
    }
    case 'run': {
      // wait: false while a run is held open across steps: queueing behind it would wait for a later step.
      const ids = await session.run(async (ctx) => {
        ctx.set('last', command.value);
        const stored = await ctx.append({ role: 'assistant', content: command.text });
        return stored.map((m) => m.id);
      }, { wait: world.openRun === null });
      expect((await session.state()).context.last).toBe(command.value);
      return { messageIds: ids, destructive: false };
    }
    case 'clear':
      await session.clearContext();
      return { messageIds: [], destructive: true };
    case 'checkpoint':
      world.checkpoints.push((await session.checkpoint()).id);
      return { messageIds: [], destructive: false };
    case 'restore': {
      const id = world.checkpoints[command.pick % Math.max(1, world.checkpoints.length)];
      if (id === undefined) return { messageIds: [], destructive: false };
      await session.restore(id);
      return { messageIds: [], destructive: true };
    }
    case 'fork': {
      const id = `fork-${world.counter++}`;
      const fork = await session.fork(id);
      world.copies.push(id);
      // A copy never holds a message that stays streaming (the stream writes to the original only).
      expect((await fork.messages()).filter((m) => m.status === 'streaming')).toEqual([]);
      await fork.close();
      return { messageIds: [], destructive: false };
    }
    case 'import': {
      const data: SessionExport = await session.export();
      const id = `import-${world.counter++}`;
      const imported = await tabula.importSession({ ...data, sessionId: id });
      world.copies.push(id);
      expect((await imported.messages()).map((m) => m.id)).toEqual(data.messages.map((m) => m.id));
      await imported.close();
      return { messageIds: [], destructive: false };
    }
    case 'delete': {
      const before = [...world.handles];
      await tabula.deleteSession('s');
      world.checkpoints.length = 0;
      world.ended.push(...before);
      return { messageIds: [], destructive: true };
    }
    case 'reopen': {
      // Re-creates the session when it was deleted; both tabs take the new handle.
      world.handles[command.tab] = await tabula.session('s');
      world.handles[command.tab === 0 ? 1 : 0] = await world.tabs[command.tab === 0 ? 1 : 0].session('s');
      // A handle of the life a delete ended writes nothing into the new one.
      for (const old of world.ended.splice(0)) {
        await expect(old.append({ role: 'user', content: 'from an ended life' })).rejects.toMatchObject({ code: 'session/not-found' });
      }
      return { messageIds: [], destructive: false };
    }
  }
}

/** Everything readable about the test's sessions, from one tab. */
async function readAll(tabula: Tabula, ids: string[]): Promise<unknown> {
  const out: Record<string, unknown> = {};
  const listed = new Set((await tabula.sessions()).map((s) => s.sessionId));
  for (const id of ['s', ...ids]) {
    if (!listed.has(id)) continue;
    const session = await tabula.session(id);
    const data = await session.export();
    out[id] = { ...data, updatedAt: 0 };
    await session.close();
  }
  return out;
}

describe('two tabs interleaving random calls (property)', () => {
  it('every call resolves with its effect visible or rejects with a TabulaError; nothing acknowledged goes missing; a reopen reads the same', { timeout: 300_000 }, async () => {
    testSeed('two tabs');
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 14 }), async (steps) => {
        const name = uniqueName('two-tabs');
        const tabs: [Tabula, Tabula] = [await freshTabula({ name }), await freshTabula({ name })];
        const world: World = {
          tabs,
          handles: [await tabs[0].session('s'), await tabs[1].session('s')],
          checkpoints: [],
          copies: [],
          acked: new Map(),
          step: 0,
          counter: 0,
          openStreams: [],
          openRun: null,
          ended: [],
        };
        for (const step of steps) {
          world.step += 1;
          const results = await Promise.allSettled(step.map((command) => execute(world, command)));
          for (const [index, result] of results.entries()) {
            if (result.status === 'rejected') {
              if (!isTabulaError(result.reason)) throw new Error(`${JSON.stringify(step[index])} threw a raw error`, { cause: result.reason });
              continue;
            }
            // A destructive call removes what was acknowledged before it, or alongside it (a race).
            if (result.value.destructive) world.acked.clear();
          }
          for (const result of results) {
            if (result.status === 'fulfilled' && !step.some((c, i) => results[i]?.status === 'fulfilled' && ['clear', 'restore', 'delete'].includes(c.kind))) {
              for (const id of result.value.messageIds) world.acked.set(id, world.step);
            }
          }
          // A run that resolved committed its context: visible at once, unless something raced it in this step.
          const settledRun = results.find((r): r is PromiseFulfilledResult<Effect> => r.status === 'fulfilled' && r.value.context !== undefined);
          if (settledRun && step.length === 1) {
            const state = await (await tabs[0].session('s')).state();
            expect(state.context.last, 'a run resolved but its context is not stored').toBe(settledRun.value.context);
          }
          // Both tabs see every acknowledged message.
          for (const tab of tabs) {
            const listed = (await tab.sessions()).some((s) => s.sessionId === 's');
            if (!listed) {
              expect(world.acked.size).toBe(0);
              continue;
            }
            const session = await tab.session('s');
            const ids = new Set((await session.messages()).map((m) => m.id));
            for (const id of world.acked.keys()) expect(ids.has(id), `message ${id} acknowledged at step ${world.acked.get(id)} is missing`).toBe(true);
            await session.close();
          }
        }
        // Finish what is still open: a run held open, streams left streaming.
        if (world.openRun) {
          world.openRun.release();
          await world.openRun.result.catch((error: unknown) => expect(isTabulaError(error)).toBe(true));
        }
        for (const stream of world.openStreams) await stream.abort().catch((error: unknown) => expect(isTabulaError(error)).toBe(true));
        const before = await readAll(tabs[0], world.copies);
        expect(await readAll(tabs[1], world.copies)).toEqual(before);
        await tabs[0].close();
        await tabs[1].close();
        const reopened = await freshTabula({ name });
        expect(await readAll(reopened, world.copies)).toEqual(before);
        await reopened.close();
      }),
      fcParams(25),
    );
  });
});
