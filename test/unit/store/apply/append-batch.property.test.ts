/**
 * Appends are applied in batches (`applyAppends`: one bulkAdd for an
 * import, a batch, a sync pull). A batch must leave exactly what applying
 * the same ops one at a time leaves, whatever the mix: fresh appends,
 * replays (same id, same or another order), duplicates inside one batch,
 * appends ordered before the session's creation, and ops delivered out
 * of order. Mixes with other kinds are one-transaction.property.test.ts's.
 * Seeded (test/unit/seed.ts): the seed is printed; TABULA_SEED=<n> replays it (Node).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, type Op, type OpBody, type OpKind } from '../../../../src/core/index.js';
import { applyOps } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { fcParams, TEST_SEED } from '../../seed.js';
import { uniqueName } from '../helpers.js';

type Action =
  | { kind: 'append'; text: string }
  | { kind: 'replay'; pick: number; sameOrder: boolean }
  | { kind: 'stale'; text: string };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('append' as const), text: fc.string({ maxLength: 6 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('replay' as const), pick: fc.nat(), sameOrder: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('stale' as const), text: fc.string({ maxLength: 6 }) }) },
);

function toOps(actions: Action[]): Op[] {
  const clock = createHlc({ clientId: 'gen', wallClock: () => 1_700_000_000_000 });
  let seq = 0;
  const make = <K extends OpKind>(kind: K, body: OpBody<K>, order = clock.now()): Op =>
    ({ id: `op${++seq}`, kind, userId: 'u', sessionId: 's', order, body }) as Op;
  const ops: Op[] = [make('session.create', { createdAt: 1, forkOf: null })];
  const appends: Op[] = [];
  for (const action of actions) {
    switch (action.kind) {
      case 'append': {
        const op = make('message.append', { id: `m${seq}`, createdAt: seq, status: 'complete', message: { role: 'user', content: action.text } });
        appends.push(op);
        ops.push(op);
        break;
      }
      case 'replay': {
        const earlier = appends[action.pick % Math.max(1, appends.length)];
        if (earlier) ops.push(action.sameOrder ? earlier : { ...earlier, id: `op${++seq}`, order: clock.now() });
        break;
      }
      case 'stale':
        // Ordered before the session's creation: from an earlier life of this id, never applied.
        ops.push(make('message.append', { id: `m${seq}`, createdAt: seq, status: 'complete', message: { role: 'user', content: action.text } }, `000000000000001.000000.old`));
        break;
    }
  }
  return ops;
}

async function inTransaction(db: TabulaDb, ops: readonly Op[]): Promise<Op[]> {
  return db.transaction('rw', sessionTables(db), () => applyOps(db, ops));
}

async function snapshot(db: TabulaDb): Promise<unknown> {
  const out: Record<string, unknown> = {};
  for (const table of sessionTables(db)) out[table.name] = await table.toArray();
  return out;
}

describe('applyAppends: a batch equals the same ops one at a time (property)', () => {
  it(`whatever mix of appends, replays, duplicates and stale appends, in or out of order (seed ${TEST_SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(actionArb, { maxLength: 30 }), fc.option(fc.nat()), async (actions, shuffle) => {
        let ops = toOps(actions);
        // Sync may deliver ops late: rotate all but the first create.
        if (shuffle !== null && ops.length > 2) {
          const k = 1 + (shuffle % (ops.length - 1));
          ops = [ops[0] as Op, ...ops.slice(k), ...ops.slice(1, k)];
        }
        const batched = createDb(uniqueName('batched'));
        const single = createDb(uniqueName('single'));
        try {
          const appliedBatched = await inTransaction(batched, ops);
          const appliedSingle: Op[] = [];
          for (const op of ops) appliedSingle.push(...(await inTransaction(single, [op])));
          expect(appliedBatched.map((op) => op.id)).toEqual(appliedSingle.map((op) => op.id));
          expect(await snapshot(batched)).toEqual(await snapshot(single));
        } finally {
          batched.close();
          single.close();
        }
      }),
      // Every run, however slow the machine: a time limit would check fewer cases under load, and pass.
      fcParams(120),
    );
  }, 600_000);
});
