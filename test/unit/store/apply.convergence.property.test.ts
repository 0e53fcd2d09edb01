/**
 * Convergence of the one write path (property): three devices write to one
 * session without seeing each other, deleting it and creating it again as
 * they go, then each op reaches a replica in any order that keeps each
 * device's own order (as sync delivers them), in random batches. Every
 * replica must end equal to one that applied all ops in order-key order.
 * Each device stamps its ops with the life they were written in, as the
 * writer does (`Op.after`); a run without lives (ops from before they were
 * named) leaves re-creates out, which those ops cannot order. Saves with
 * clashing versions and restores are left out: apply.guards.test.ts covers them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, hlcOf, subOrder, type Op, type OpBody, type OpKind } from '../../../src/core/index.js';
import { applyOps, StaleKnownRow, type ApplyOptions } from '../../../src/store/apply.js';
import { createKnownRows } from '../../../src/store/known-rows.js';
import { createDb, sessionTables, type TabulaDb } from '../../../src/store/schema.js';
import { fcParams } from '../seed.js';
import { expectStreamIndexExact, uniqueName, withoutLife } from './helpers.js';

type Action =
  | { kind: 'append'; streaming: boolean }
  | { kind: 'finish'; status: 'complete' | 'interrupted' }
  | { kind: 'grow' }
  | { kind: 'prefix' }
  | { kind: 'memorySet'; key: 'a' | 'b'; value: number }
  | { kind: 'memoryDelete'; key: 'a' | 'b' }
  | { kind: 'note' }
  | { kind: 'journal'; entries: number }
  | { kind: 'commit' }
  | { kind: 'clear' }
  | { kind: 'checkpoint' }
  | { kind: 'delete' }
  | { kind: 'create' }
  | { kind: 'tick'; ms: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('append' as const), streaming: fc.boolean() }), weight: 4 },
  fc.record({ kind: fc.constant('finish' as const), status: fc.constantFrom('complete' as const, 'interrupted' as const) }),
  fc.record({ kind: fc.constant('grow' as const) }),
  fc.record({ kind: fc.constant('prefix' as const) }),
  { arbitrary: fc.record({ kind: fc.constant('memorySet' as const), key: fc.constantFrom('a' as const, 'b' as const), value: fc.integer() }), weight: 2 },
  fc.record({ kind: fc.constant('memoryDelete' as const), key: fc.constantFrom('a' as const, 'b' as const) }),
  fc.record({ kind: fc.constant('note' as const) }),
  fc.record({ kind: fc.constant('journal' as const), entries: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('commit' as const) }),
  fc.record({ kind: fc.constant('clear' as const) }),
  fc.record({ kind: fc.constant('checkpoint' as const) }),
  { arbitrary: fc.constant({ kind: 'delete' as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'create' as const }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 5 }) }), weight: 3 },
);

/**
 * One device's ops, made by its own clock (skewed by `skewMs`), the way its session handle would: with
 * `lives`, each op names the life it was written in, and after a delete the device may create the
 * session again; it writes nothing while the session is gone here.
 */
function deviceOps(device: string, skewMs: number, actions: Action[], lives: boolean, created: Op): Op[] {
  let wall = 1_700_000_000_000 + skewMs;
  const clock = createHlc({ clientId: device, wallClock: () => wall });
  // The device has the session, so its clock has seen the create (a clock behind it moves past it).
  clock.receive(hlcOf(created.order));
  let seq = 0;
  let journalCount = 0;
  let lastEntry: string | undefined;
  let streaming: string[] = [];
  const ops: Op[] = [];
  // The device's current life ('' the shared first one) and whether the session exists on it.
  let after = '';
  let exists = true;
  const make = <K extends OpKind>(kind: K, body: OpBody<K>) => {
    const op = { id: `${device}-op${++seq}`, kind, userId: 'u', sessionId: 's', order: clock.now(), ...(lives ? { after } : {}), body } as Op;
    ops.push(op);
    return op;
  };
  for (const action of actions) {
    if (action.kind === 'tick') {
      wall += action.ms;
      continue;
    }
    if (action.kind === 'create') {
      if (exists || !lives) continue;
      make('session.create', { createdAt: seq, forkOf: null });
      exists = true;
      continue;
    }
    if (!exists) continue;
    switch (action.kind) {
      case 'append': {
        const id = `${device}-m${seq}`;
        make('message.append', { id, createdAt: seq, status: action.streaming ? 'streaming' : 'complete', message: { role: 'assistant', content: `${device} ${seq}` } });
        if (action.streaming) streaming.push(id);
        break;
      }
      case 'grow':
      case 'finish': {
        const id = streaming.at(-1);
        if (!id) break;
        const status = action.kind === 'grow' ? 'streaming' : action.status;
        make('message.update', { id, status, message: { role: 'assistant', content: `${id} ${status} at ${seq}` } });
        if (status !== 'streaming') streaming.pop();
        break;
      }
      case 'prefix':
        make('prefix.set', { prefix: { systemPrompt: `${device} ${seq}`, grounding: [], schemaBlock: null } });
        break;
      case 'memorySet':
        make('memory.set', { scope: 'default', key: action.key, value: action.value });
        break;
      case 'memoryDelete':
        make('memory.delete', { scope: 'default', key: action.key });
        break;
      case 'note':
        make('note.add', { text: `${device} ${seq}`, runId: null, scope: null, at: seq });
        break;
      case 'journal':
        journalCount += action.entries;
        lastEntry = subOrder(make('journal.append', { entries: Array.from({ length: action.entries }, (_, i) => `${device}${seq}.${i}`) }).order, action.entries - 1);
        break;
      case 'commit':
        // The session handle names the last entry it has seen; an empty journal has nothing to commit.
        if (lastEntry !== undefined) make('journal.commit', { watermark: journalCount, through: lastEntry });
        break;
      case 'clear':
        make('session.clear', {});
        break;
      case 'checkpoint':
        make('checkpoint.create', {
          id: `${device}-cp${seq}`,
          label: null,
          at: seq,
          snapshot: { prefix: { systemPrompt: 'cp', grounding: [], schemaBlock: null }, state: { summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} }, messages: [] },
        });
        break;
      case 'delete':
        after = make('session.delete', {}).order;
        exists = false;
        journalCount = 0;
        lastEntry = undefined;
        streaming = [];
        break;
    }
  }
  return ops;
}

async function replicaOf(batches: Op[][]): Promise<TabulaDb> {
  const db = createDb(uniqueName('converge'));
  for (const batch of batches) await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch));
  return db;
}

async function contents(db: TabulaDb): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const table of sessionTables(db)) {
    if (table.name === 'outbox') continue;
    out[table.name] = (await table.toArray()).map(withoutLife);
  }
  await expectStreamIndexExact(db);
  db.close();
  return out;
}

/** Three devices' ops (see deviceOps), in order-key order and as a random causal merge cut into random batches. */
const scenarioArb = fc
  .tuple(
    fc.boolean(),
    fc.array(fc.array(actionArb, { maxLength: 20 }), { minLength: 3, maxLength: 3 }),
    fc.array(fc.integer({ min: -3, max: 3 }), { minLength: 3, maxLength: 3 }),
    fc.infiniteStream(fc.integer({ min: 0, max: 5 })),
  )
  .map(([lives, actions, skews, choices]) => {
    const create: Op = {
      id: 'create',
      kind: 'session.create',
      userId: 'u',
      sessionId: 's',
      order: createHlc({ clientId: '0', wallClock: () => 1_699_999_999_999 }).now(),
      ...(lives ? { after: '' } : {}),
      body: { createdAt: 1, forkOf: null },
    };
    const devices = ['a', 'b', 'c'].map((device, index) => deviceOps(device, skews[index]!, actions[index]!, lives, create));
    const sorted = [create, ...devices.flat()].sort((x, y) => (x.order < y.order ? -1 : 1));
    // A random merge of the devices' ops that keeps each one's order, cut into random batches.
    const picks = choices[Symbol.iterator]();
    const batches: Op[][] = [[create]];
    const next = devices.map(() => 0);
    for (let left = sorted.length - 1; left > 0; left--) {
      const choice = picks.next().value as number;
      const open = devices.flatMap((ops, index) => (next[index]! < ops.length ? [index] : []));
      const device = open[choice % open.length]!;
      if (choice >= 3) batches.push([]);
      batches.at(-1)!.push(devices[device]![next[device]!++]!);
    }
    return { sorted, batches };
  });

/**
 * A replica applying `batches` as the sync leader of one tab does: on the session rows it knows
 * (`known`), recording the rows each batch leaves once it commits, applying again from the stored rows
 * when a known one is stale. The batches `otherTab` marks are applied by another tab instead, which the
 * leader does not hear of, so its known row goes stale. Returns how often a batch found a known row
 * stale when no other tab had written since the leader's last batch (it must be never).
 */
async function replicaWithKnownRows(batches: Op[][], otherTab: readonly boolean[]): Promise<{ db: TabulaDb; needlessRetries: number }> {
  const db = createDb(uniqueName('known'));
  const known = createKnownRows();
  let needlessRetries = 0;
  let writtenBehind = false;
  for (const [index, batch] of batches.entries()) {
    if (otherTab[index]) {
      await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch));
      writtenBehind = true;
      continue;
    }
    const settled: NonNullable<ApplyOptions['settled']> = [];
    try {
      await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch, { known, settled }));
    } catch (error) {
      if (!(error instanceof StaleKnownRow)) throw error;
      if (!writtenBehind) needlessRetries += 1;
      settled.length = 0;
      await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch, { settled }));
    }
    writtenBehind = false;
    for (const { userId, sessionId, row } of settled) known.set(userId, sessionId, row);
  }
  return { db, needlessRetries };
}

describe('applyOps convergence (property)', () => {
  it('replicas that receive three devices\' ops in any causal order end equal to in-order application', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ sorted, batches }) => {
        const expected = await contents(await replicaOf([sorted]));
        expect(await contents(await replicaOf(batches))).toEqual(expected);
      }),
      fcParams(60),
    );
  }, 240_000);

  // The sync leader builds pulled pages on the session rows it knows. A known row is a guess: one that
  // another tab made stale must never be the base of what lands, and one nobody changed must hold (or
  // every page would be applied twice).
  it('a replica building on known session rows, with another tab writing behind its back, ends the same; an unchanged known row always holds', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, fc.infiniteStream(fc.boolean()), async ({ sorted, batches }, flips) => {
        const picks = flips[Symbol.iterator]();
        const otherTab = batches.map((_, index) => index > 0 && (picks.next().value as boolean));
        const expected = await contents(await replicaOf([sorted]));
        const { db, needlessRetries } = await replicaWithKnownRows(batches, otherTab);
        expect(await contents(db)).toEqual(expected);
        expect(needlessRetries).toBe(0);
      }),
      fcParams(60),
    );
  }, 240_000);
});
