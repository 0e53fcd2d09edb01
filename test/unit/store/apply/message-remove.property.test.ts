/**
 * `message.remove` (the op behind `tx.removeMessages()`): a removed message
 * stays removed whatever the delivery: ops applied twice, in any order, or
 * a remove that arrives before its append; replicas converge on the
 * messages and the session row. Seeded: the seed is printed, TABULA_SEED
 * replays it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, type Op, type OpBody, type OpKind } from '../../../../src/core/index.js';
import { applyOps } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { fcParams, testSeed } from '../../seed.js';
import { freshTabula, uniqueName } from '../helpers.js';

type Action = { kind: 'append'; id: number } | { kind: 'remove'; id: number } | { kind: 'clear' };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('append' as const), id: fc.nat(5) }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('remove' as const), id: fc.nat(5) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('clear' as const) }), weight: 1 },
);

/** Ops as the store makes them: one append per message id, never after a remove of that id (ids are fresh); removes of any id. */
function toOps(actions: Action[]): { create: Op; ops: Op[]; removed: Set<string> } {
  const clock = createHlc({ clientId: 'gen', wallClock: () => 1_700_000_000_000 });
  let seq = 0;
  const make = <K extends OpKind>(kind: K, body: OpBody<K>): Op => ({ id: `op${++seq}`, kind, userId: 'u', sessionId: 's', order: clock.now(), body }) as Op;
  const create = make('session.create', { createdAt: 1, forkOf: null });
  const appended = new Set<number>();
  const removed = new Set<string>();
  const ops: Op[] = [];
  for (const action of actions) {
    if (action.kind === 'append' && !appended.has(action.id) && !removed.has(`m${action.id}`)) {
      appended.add(action.id);
      ops.push(make('message.append', { id: `m${action.id}`, createdAt: seq, status: 'complete', message: { role: 'user', content: `m${action.id}` } }));
    } else if (action.kind === 'remove') {
      removed.add(`m${action.id}`);
      ops.push(make('message.remove', { id: `m${action.id}` }));
    } else if (action.kind === 'clear') {
      ops.push(make('session.clear', {}));
    }
  }
  return { create, ops, removed };
}

async function applyAll(db: TabulaDb, ops: readonly Op[]): Promise<void> {
  await db.transaction('rw', sessionTables(db), async () => {
    await applyOps(db, ops);
  });
}

async function state(db: TabulaDb): Promise<{ messages: unknown[]; session: unknown }> {
  return { messages: await db.messages.toArray(), session: await db.sessions.get(['u', 's']) };
}

const PROPERTY_TIMEOUT_MS = 180_000;

describe('message.remove (property)', () => {
  it('a removed message never comes back: ops applied twice or in any order converge', { timeout: PROPERTY_TIMEOUT_MS }, async () => {
    testSeed('message.remove');
    await fc.assert(
      fc.asyncProperty(
        fc.array(actionArb, { maxLength: 20 }).chain((actions) => {
          const generated = toOps(actions);
          return fc.tuple(fc.constant(generated), fc.shuffledSubarray(generated.ops, { minLength: generated.ops.length }));
        }),
        async ([{ create, ops, removed }, shuffled]) => {
          const reference = createDb(uniqueName('ref'));
          const replayed = createDb(uniqueName('twice'));
          const reordered = createDb(uniqueName('shuffled'));
          await applyAll(reference, [create, ...ops]);
          await applyAll(replayed, [create, ...ops]);
          await applyAll(replayed, [create, ...ops]);
          await applyAll(reordered, [create, ...shuffled]);
          const expected = await state(reference);
          for (const message of expected.messages as { id: string }[]) expect(removed.has(message.id)).toBe(false);
          expect((expected.session as { messageCount: number }).messageCount).toBe(expected.messages.length);
          expect(await state(replayed)).toEqual(expected);
          expect(await state(reordered)).toEqual(expected);
          reference.close();
          replayed.close();
          reordered.close();
        },
      ),
      fcParams(150),
    );
  });

  it('a replayed append of a message removed through the API is refused', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const removedId = await session.memory('x').transact(async (tx) => {
      const [first] = await tx.appendMessages([{ role: 'user', content: 'gone' }, { role: 'assistant', content: 'kept' }]);
      return first!.id;
    });
    const [stored] = (await session.export()).messages;
    await session.memory('x').transact((tx) => tx.removeMessages([removedId]));
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);

    const db = createDb(tabula.dbName);
    const replay: Op = {
      id: 'replayed',
      kind: 'message.append',
      userId: 'anonymous',
      sessionId: 's',
      order: stored!.order,
      body: { id: stored!.id, createdAt: stored!.createdAt, status: stored!.status, message: stored!.message },
    };
    await applyAll(db, [replay, replay]);
    db.close();
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);
    expect(await session.messageCount()).toBe(1);
    await tabula.close();
  });

  it('tx.appendMessages and tx.removeMessages refuse wrong arguments and write nothing', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const memory = session.memory('x');
    const attempts: [() => Promise<unknown>, string][] = [
      [() => memory.transact((tx) => tx.removeMessages('m1' as never)), 'tx.removeMessages(ids) in memory "x" of session "s" takes an array of message ids'],
      [() => memory.transact((tx) => tx.removeMessages([''])), 'ids[0] must be a message id'],
      [() => memory.transact((tx) => tx.appendMessages({ role: 'user', content: 'a' } as never)), 'takes an array of messages'],
      [
        async () =>
          memory.transact(async (tx) => {
            await tx.set('k', 1);
            await tx.appendMessages([{ role: 'user', content: 'a' }, { role: 'wizard', content: 'b' } as never]);
          }),
        'message[1] is not a valid chat message',
      ],
    ];
    for (const [attempt, text] of attempts) {
      const result = attempt();
      await expect(result).rejects.toMatchObject({ name: 'TabulaError' });
      await expect(result).rejects.toThrow(text);
    }
    expect(await session.messages()).toEqual([]);
    expect(await memory.get('k')).toBeUndefined();
    await tabula.close();
  });
});
