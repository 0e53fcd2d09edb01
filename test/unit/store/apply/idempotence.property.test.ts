/**
 * The one write path is idempotent and order-tolerant: applying every op of
 * a session twice (as a sync retry would), or delivering ops late and out of
 * order, leaves the same session as applying them once in order; two
 * replicas that receive the ops of two writers in different interleavings
 * converge on every table. Ops are generated at random, as the store and the
 * server produce them. Seeded: the seed is printed, TABULA_SEED replays it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, type Op, type OpBody, type OpKind } from '../../../../src/core/index.js';
import { applyOps } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { fcParams, testSeed } from '../../seed.js';
import { expectStreamIndexExact, freshTabula, uniqueName, withoutLife } from '../helpers.js';

type Action =
  | { kind: 'append'; text: string }
  | { kind: 'stream'; text: string; final: 'complete' | 'interrupted' }
  | { kind: 'prefix'; text: string }
  | { kind: 'save'; summary: string }
  | { kind: 'journal'; entries: number[] }
  | { kind: 'commit' }
  | { kind: 'note'; text: string }
  | { kind: 'memorySet'; key: 'a' | 'b'; value: number }
  | { kind: 'memoryDelete'; key: 'a' | 'b' }
  | { kind: 'clear' }
  | { kind: 'checkpoint' }
  | { kind: 'restore'; pick: number }
  | { kind: 'delete' }
  | { kind: 'create' };

const streamArb = fc.record({
  kind: fc.constant('stream' as const),
  text: fc.string({ maxLength: 8 }),
  final: fc.constantFrom('complete' as const, 'interrupted' as const),
});

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), text: fc.string({ maxLength: 8 }) }),
  streamArb,
  fc.record({ kind: fc.constant('prefix' as const), text: fc.string({ maxLength: 8 }) }),
  fc.record({ kind: fc.constant('save' as const), summary: fc.string({ maxLength: 8 }) }),
  fc.record({ kind: fc.constant('journal' as const), entries: fc.array(fc.integer(), { minLength: 1, maxLength: 3 }) }),
  fc.record({ kind: fc.constant('commit' as const) }),
  fc.record({ kind: fc.constant('note' as const), text: fc.string({ minLength: 1, maxLength: 8 }) }),
  fc.record({ kind: fc.constant('memorySet' as const), key: fc.constantFrom('a' as const, 'b' as const), value: fc.integer() }),
  fc.record({ kind: fc.constant('memoryDelete' as const), key: fc.constantFrom('a' as const, 'b' as const) }),
  fc.record({ kind: fc.constant('clear' as const) }),
  fc.record({ kind: fc.constant('checkpoint' as const) }),
  fc.record({ kind: fc.constant('restore' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('delete' as const) }),
  fc.record({ kind: fc.constant('create' as const) }),
);

/** Turns actions into ops the way the session handle does, tracking versions like the store. */
function toOps(actions: Action[], clientId = 'gen', withCreate = true): Op[] {
  const clock = createHlc({ clientId, wallClock: () => 1_700_000_000_000 });
  let seq = 0;
  let version = 0;
  let journalCount = 0;
  const checkpoints: string[] = [];
  const make = <K extends OpKind>(kind: K, body: OpBody<K>): Op =>
    ({ id: `${clientId}-op${++seq}`, kind, userId: 'u', sessionId: 's', order: clock.now(), body }) as Op;
  const ops: Op[] = withCreate ? [make('session.create', { createdAt: 1, forkOf: null })] : [];
  for (const action of actions) {
    switch (action.kind) {
      case 'append':
        ops.push(make('message.append', { id: `${clientId}-m${seq}`, createdAt: seq, status: 'complete', message: { role: 'user', content: action.text } }));
        break;
      case 'prefix':
        ops.push(make('prefix.set', { prefix: { systemPrompt: action.text, grounding: [], schemaBlock: null } }));
        break;
      case 'stream': {
        // As stream.ts writes it: a streaming append, a flush of part of the text, then the final update.
        const id = `${clientId}-m${seq}`;
        const append = make('message.append', { id, createdAt: seq, status: 'streaming', message: { role: 'assistant', content: '' } });
        ops.push(append);
        const at = { order: append.order, createdAt: append.kind === 'message.append' ? append.body.createdAt : 0 };
        ops.push(make('message.update', { id, status: 'streaming', message: { role: 'assistant', content: action.text.slice(0, 3) }, ...at }));
        ops.push(make('message.update', { id, status: action.final, message: { role: 'assistant', content: action.text }, ...at }));
        break;
      }
      case 'save':
        // As the store writes it: the whole state, not only the changed field.
        ops.push(make('state.save', { version: ++version, patch: { summary: action.summary, tasks: seq, plan: clientId, permissions: null, tools: [], context: {} } }));
        break;
      case 'journal':
        journalCount += action.entries.length;
        ops.push(make('journal.append', { entries: action.entries }));
        break;
      case 'commit':
        ops.push(make('journal.commit', { watermark: journalCount }));
        break;
      case 'note':
        ops.push(make('note.add', { text: action.text, runId: null, scope: null, at: seq }));
        break;
      case 'memorySet':
        ops.push(make('memory.set', { scope: 'default', key: action.key, value: action.value }));
        break;
      case 'memoryDelete':
        ops.push(make('memory.delete', { scope: 'default', key: action.key }));
        break;
      case 'clear':
        ops.push(make('session.clear', {}));
        break;
      case 'checkpoint': {
        // The snapshot content does not matter for idempotence; an empty one keeps the test fast.
        const id = `${clientId}-cp${seq}`;
        checkpoints.push(id);
        const messages = ops
          .filter((op) => op.kind === 'message.append')
          .slice(-2)
          .map((op) => ({ id: op.body.id, order: op.order, createdAt: op.body.createdAt, status: op.body.status, message: op.body.message }));
        ops.push(make('checkpoint.create', { id, label: null, at: seq, snapshot: { prefix: { systemPrompt: 'cp', grounding: [], schemaBlock: null }, state: { summary: 'cp', tasks: null, plan: null, permissions: null, tools: [], context: {} }, messages } }));
        break;
      }
      case 'restore':
        if (checkpoints.length > 0) ops.push(make('checkpoint.restore', { id: checkpoints[action.pick % checkpoints.length] as string, version: ++version }));
        break;
      case 'delete':
        ops.push(make('session.delete', {}));
        version = 0;
        journalCount = 0;
        checkpoints.length = 0;
        break;
      case 'create':
        ops.push(make('session.create', { createdAt: seq, forkOf: null }));
        break;
    }
  }
  return ops;
}

async function applyAll(db: TabulaDb, ops: readonly Op[]): Promise<void> {
  await db.transaction('rw', sessionTables(db), async () => {
    await applyOps(db, ops);
  });
}

async function snapshot(db: TabulaDb, withMeta = false): Promise<unknown> {
  const tables = sessionTables(db).filter((t) => t.name !== 'outbox' && (withMeta || t.name !== 'meta'));
  const out: Record<string, unknown> = {};
  for (const table of tables) out[table.name] = (await table.toArray()).map(withoutLife);
  await expectStreamIndexExact(db);
  return out;
}

/** Budget for the property tests: generous, so that a slow, loaded 2-core machine finishes them. */
const PROPERTY_TIMEOUT_MS = 180_000;

/** The ops both writers may make concurrently without a version number to agree on. */
const concurrentActionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), text: fc.string({ maxLength: 8 }) }),
  fc.record({ kind: fc.constant('prefix' as const), text: fc.string({ maxLength: 8 }) }),
  fc.record({ kind: fc.constant('journal' as const), entries: fc.array(fc.integer(), { minLength: 1, maxLength: 3 }) }),
  fc.record({ kind: fc.constant('note' as const), text: fc.string({ minLength: 1, maxLength: 8 }) }),
  fc.record({ kind: fc.constant('memorySet' as const), key: fc.constantFrom('a' as const, 'b' as const), value: fc.integer() }),
  fc.record({ kind: fc.constant('memoryDelete' as const), key: fc.constantFrom('a' as const, 'b' as const) }),
  fc.record({ kind: fc.constant('clear' as const) }),
);

/** Merges two sequences in the order `picks` says (true: next from `a`), keeping each sequence's own order. */
function interleave<T>(a: readonly T[], b: readonly T[], picks: readonly boolean[]): T[] {
  const out: T[] = [];
  let i = 0;
  let j = 0;
  for (const pick of picks) {
    if (i >= a.length && j >= b.length) break;
    const fromA = j >= b.length || (pick && i < a.length);
    out.push((fromA ? a[i++] : b[j++]) as T);
  }
  while (i < a.length) out.push(a[i++] as T);
  while (j < b.length) out.push(b[j++] as T);
  return out;
}

describe('applyOp idempotence and convergence (property)', () => {
  it('applying every op twice equals applying it once', { timeout: PROPERTY_TIMEOUT_MS }, async () => {
    testSeed('apply idempotence');
    await fc.assert(
      fc.asyncProperty(fc.array(actionArb, { maxLength: 25 }), fc.boolean(), async (actions, interleaved) => {
        const ops = toOps(actions);
        const once = createDb(uniqueName('once'));
        const twice = createDb(uniqueName('twice'));
        await applyAll(once, ops);
        // A retry either re-sends each op right away or the whole batch again.
        if (interleaved) {
          await applyAll(twice, ops.flatMap((op) => [op, op]));
        } else {
          await applyAll(twice, ops);
          await applyAll(twice, ops);
        }
        expect(await snapshot(twice)).toEqual(await snapshot(once));
        once.close();
        twice.close();
      }),
      fcParams(150),
    );
  });

  it('ops delivered again late, in any order, change nothing', { timeout: PROPERTY_TIMEOUT_MS }, async () => {
    testSeed('apply late delivery');
    await fc.assert(
      fc.asyncProperty(
        fc.array(actionArb, { maxLength: 25 }).chain((actions) => {
          const ops = toOps(actions);
          // A random subset of the ops, in a random order, arriving after everything was applied.
          return fc.tuple(fc.constant(ops), fc.shuffledSubarray(ops), fc.boolean());
        }),
        async ([ops, late, oneByOne]) => {
          const reference = createDb(uniqueName('ref'));
          const replica = createDb(uniqueName('late'));
          await applyAll(reference, ops);
          await applyAll(replica, ops);
          if (oneByOne) for (const op of late) await applyAll(replica, [op]);
          else await applyAll(replica, late);
          expect(await snapshot(replica)).toEqual(await snapshot(reference));
          reference.close();
          replica.close();
        },
      ),
      fcParams(150),
    );
  });

  it('two replicas that get two writers’ ops in different interleavings converge on every table', { timeout: PROPERTY_TIMEOUT_MS }, async () => {
    testSeed('apply convergence');
    await fc.assert(
      fc.asyncProperty(
        fc.array(concurrentActionArb, { maxLength: 15 }),
        fc.array(concurrentActionArb, { maxLength: 15 }),
        fc.array(fc.boolean(), { maxLength: 30 }),
        fc.array(fc.boolean(), { maxLength: 30 }),
        async (actionsA, actionsB, picks1, picks2) => {
          // Both writers start from the same created session; each one's ops reach the replicas in its own order.
          const [create, ...opsA] = toOps(actionsA, 'writerA');
          const opsB = toOps(actionsB, 'writerB', false);
          const one = createDb(uniqueName('one'));
          const two = createDb(uniqueName('two'));
          await applyAll(one, [create as Op, ...interleave(opsA, opsB, picks1)]);
          await applyAll(two, [create as Op, ...interleave(opsB, opsA, picks2)]);
          expect(await snapshot(two)).toEqual(await snapshot(one));
          one.close();
          two.close();
        },
      ),
      fcParams(150),
    );
  });

  it('replicas that get one op set of three writers in random orders, with duplicates and random batches, end equal on every table', { timeout: PROPERTY_TIMEOUT_MS }, async () => {
    testSeed('apply random order');
    // Everything but a re-create after a delete: a session's lives must reach a replica in order (see store/apply/).
    const writerActionArb = actionArb.filter((action) => action.kind !== 'create');
    const deliveryArb = (count: number) =>
      fc.record({
        // A sort key per op (a random permutation) and the ops delivered a second time.
        keys: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: count, maxLength: count }),
        duplicates: fc.array(fc.nat({ max: count - 1 }), { maxLength: 6 }),
        batch: fc.integer({ min: 1, max: 8 }),
      });
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(...['wa', 'wb', 'wc'].map((writer) => fc.array(writerActionArb, { maxLength: 12 }).map((actions) => toOps(actions, writer)))).chain((byWriter) => {
          const ops = byWriter.flat();
          return fc.tuple(fc.constant(byWriter), fc.array(deliveryArb(ops.length), { minLength: 2, maxLength: 2 }));
        }),
        async ([byWriter, deliveries]) => {
          const ops = byWriter.flat();
          // Each writer created the session itself (concurrent creates); creates and the checkpoints a
          // restore needs come first, as sync delivers them (each device pushes its ops in order).
          const first = (op: Op) => op.kind === 'session.create' || op.kind === 'checkpoint.create';
          const reference = createDb(uniqueName('ref'));
          await applyAll(reference, [...ops.filter((op) => op.kind === 'session.create'), ...ops.filter((op) => !first(op) || op.kind === 'checkpoint.create')]);
          const expected = await snapshot(reference, true);
          reference.close();
          for (const { keys, duplicates, batch } of deliveries) {
            const shuffled = ops.map((op, index) => ({ op, key: keys[index] as number })).sort((a, b) => a.key - b.key).map(({ op }) => op);
            const rest: Op[] = shuffled.filter((op) => !first(op));
            for (const index of duplicates) rest.splice(Math.min(index, rest.length), 0, ops[index] as Op);
            const order = [...shuffled.filter((op) => op.kind === 'session.create'), ...shuffled.filter((op) => op.kind === 'checkpoint.create'), ...rest];
            const replica = createDb(uniqueName('replica'));
            for (let start = 0; start < order.length; start += batch) await applyAll(replica, order.slice(start, start + batch));
            expect(await snapshot(replica, true)).toEqual(expected);
            replica.close();
          }
        },
      ),
      fcParams(120),
    );
  });

  it('session ops written through the API are applied once even when re-applied', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }]);
    const exported = await session.export();
    const db = createDb(tabula.dbName);
    const [message] = exported.messages;
    const replay: Op = { id: 'replayed', kind: 'message.append', userId: 'anonymous', sessionId: 's', order: message!.order, body: { id: message!.id, createdAt: message!.createdAt, status: message!.status, message: message!.message } };
    await applyAll(db, [replay, replay]);
    db.close();
    expect(await session.messageCount()).toBe(2);
    await tabula.close();
  });
});
