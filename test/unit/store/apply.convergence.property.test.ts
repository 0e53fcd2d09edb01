/**
 * Convergence of the one write path (property): two devices write to one
 * session without seeing each other, then each op reaches a replica in any
 * order that keeps each device's own order (as sync delivers them), in
 * random batches. Every replica must end equal to one that applied all ops
 * in order-key order. Saves with clashing versions and restores are left
 * out: their divergences are the expected failures in apply.guards.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, subOrder, type Op, type OpBody, type OpKind } from '../../../src/core/index.js';
import { applyOps } from '../../../src/store/apply.js';
import { createDb, sessionTables, type TabulaDb } from '../../../src/store/schema.js';
import { fcParams } from '../seed.js';
import { uniqueName, withoutLife } from './helpers.js';

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
  { arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 5 }) }), weight: 3 },
);

/** One device's ops, made by its own clock (skewed by `skewMs`), the way its session handle would. */
function deviceOps(device: string, skewMs: number, actions: Action[]): Op[] {
  let wall = 1_700_000_000_000 + skewMs;
  const clock = createHlc({ clientId: device, wallClock: () => wall });
  let seq = 0;
  let journalCount = 0;
  let lastEntry: string | undefined;
  const streaming: string[] = [];
  const ops: Op[] = [];
  const make = <K extends OpKind>(kind: K, body: OpBody<K>) => {
    const op = { id: `${device}-op${++seq}`, kind, userId: 'u', sessionId: 's', order: clock.now(), body } as Op;
    ops.push(op);
    return op;
  };
  for (const action of actions) {
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
        make('session.delete', {});
        break;
      case 'tick':
        wall += action.ms;
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
  db.close();
  return out;
}

describe('applyOps convergence (property)', () => {
  it('replicas that receive two devices\' ops in any causal order end equal to in-order application', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(actionArb, { maxLength: 20 }),
        fc.array(actionArb, { maxLength: 20 }),
        fc.integer({ min: -3, max: 3 }),
        fc.infiniteStream(fc.integer({ min: 0, max: 3 })),
        async (actionsA, actionsB, skewB, choices) => {
          const create: Op = { id: 'create', kind: 'session.create', userId: 'u', sessionId: 's', order: createHlc({ clientId: '0', wallClock: () => 1_699_999_999_999 }).now(), body: { createdAt: 1, forkOf: null } };
          const a = deviceOps('a', 0, actionsA);
          const b = deviceOps('b', skewB, actionsB);
          const sorted = [create, ...a, ...b].sort((x, y) => (x.order < y.order ? -1 : 1));
          // A random merge of a and b that keeps each one's order, cut into random batches.
          const picks = choices[Symbol.iterator]();
          const batches: Op[][] = [[create]];
          let i = 0;
          let j = 0;
          while (i < a.length || j < b.length) {
            const choice = picks.next().value as number;
            const next = j >= b.length || (i < a.length && choice % 2 === 0) ? a[i++]! : b[j++]!;
            if (choice >= 2) batches.push([]);
            batches.at(-1)!.push(next);
          }
          const expected = await contents(await replicaOf([sorted]));
          expect(await contents(await replicaOf(batches))).toEqual(expected);
        },
      ),
      fcParams(60),
    );
  }, 120_000);
});
