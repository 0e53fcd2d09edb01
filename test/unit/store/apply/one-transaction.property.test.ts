/**
 * applyOps of many ops in one transaction (a sync pull, an import) must
 * behave as the same ops applied one transaction each, whatever the mix:
 * ops that change nothing (a second create, a delete of a deleted session,
 * a clear ordered before an applied one, a stale append) followed by ops
 * that do. The class of bug this guards: an `await` in the write path
 * that leaves Dexie's transaction zone (a native promise that touched no
 * table), after which the next request runs outside the transaction and
 * Dexie reports PrematureCommitError, or the write lands in a transaction
 * of its own.
 * Seeded (test/unit/seed.ts): the seed is printed; TABULA_SEED=<n> replays it (Node).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Op } from '../../../../src/core/index.js';
import { formatHlc } from '../../../../src/core/hlc.js';
import { applyOps } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { fcParams, TEST_SEED } from '../../seed.js';
import { uniqueName } from '../helpers.js';

const BASE_MS = 1_700_000_000_000;
const at = (ms: number): string => formatHlc({ wallMs: BASE_MS + ms, counter: 0, clientId: 'a' });

type Step =
  | { kind: 'create' | 'delete' | 'clear'; ms: number }
  | { kind: 'append'; ms: number; id: number }
  | { kind: 'prefix'; ms: number; text: string }
  | { kind: 'remove'; ms: number; id: number };

const ms = fc.integer({ min: 0, max: 60 });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constantFrom('create' as const, 'delete' as const, 'clear' as const), ms }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('append' as const), ms, id: fc.integer({ min: 0, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('prefix' as const), ms, text: fc.string({ maxLength: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), ms, id: fc.integer({ min: 0, max: 5 }) }) },
);

function toOps(steps: Step[]): Op[] {
  return steps.map((step, index): Op => {
    const base = { id: `op${index}`, userId: 'u', sessionId: 's', order: at(step.ms) };
    switch (step.kind) {
      case 'create':
        return { ...base, kind: 'session.create', body: { createdAt: 1, forkOf: null } };
      case 'delete':
        return { ...base, kind: 'session.delete', body: {} };
      case 'clear':
        return { ...base, kind: 'session.clear', body: {} };
      case 'append':
        return { ...base, kind: 'message.append', body: { id: `m${step.id}`, createdAt: 1, status: 'complete', message: { role: 'user', content: `m${step.id}` } } };
      case 'prefix':
        return { ...base, kind: 'prefix.set', body: { prefix: { systemPrompt: step.text, grounding: [], schemaBlock: null } } };
      case 'remove':
        return { ...base, kind: 'message.remove', body: { id: `m${step.id}` } };
    }
  });
}

/**
 * The ops applied in one transaction, from an async scope as the sync client's is, or from a plain one:
 * Dexie follows native awaits only inside a scope function that is itself async, so applyOps must open
 * an async scope of its own (without it, a plain scope loses the transaction: PrematureCommitError).
 */
async function inTransaction(db: TabulaDb, ops: readonly Op[], plainScope = false): Promise<Op[]> {
  return plainScope
    ? db.transaction('rw', sessionTables(db), () => applyOps(db, ops))
    : db.transaction('rw', sessionTables(db), async () => applyOps(db, ops));
}

async function snapshot(db: TabulaDb): Promise<unknown> {
  const out: Record<string, unknown> = {};
  for (const table of sessionTables(db)) out[table.name] = await table.toArray();
  return out;
}

describe('applyOps: many ops in one transaction equal one transaction per op (property)', () => {
  it(`whatever mix of no-op and effective ops, from an async or a plain scope (seed ${TEST_SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 12 }), fc.boolean(), async (steps, plainScope) => {
        // Ops of one device arrive after the create they follow; a create first keeps most runs meaningful.
        const ops = toOps([{ kind: 'create', ms: 0 }, ...steps]);
        const together = createDb(uniqueName('together'));
        const apart = createDb(uniqueName('apart'));
        try {
          const appliedTogether = await inTransaction(together, ops, plainScope);
          const appliedApart: Op[] = [];
          for (const op of ops) appliedApart.push(...(await inTransaction(apart, [op])));
          expect(appliedTogether.map((op) => op.id)).toEqual(appliedApart.map((op) => op.id));
          expect(await snapshot(together)).toEqual(await snapshot(apart));
        } finally {
          together.close();
          apart.close();
        }
      }),
      // Every run, however slow the machine: a time limit would check fewer cases under load, and pass.
      fcParams(150),
    );
  }, 600_000);
});
