/**
 * Seeded model test of the store contract: random pushes of several clients
 * (retries, overlaps, gaps) against a few lines of reference model, then
 * paged pulls of random size. Any store bug in the seq rules, the log order
 * or paging shows up as a difference from the model. Prints its seed;
 * `TABULA_SEED=n` replays one.
 */
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Op } from '../../src/core/index.js';
import { postgresStore, sqliteStore, type ServerStore } from '../../src/server/index.js';
import { decodePulled, noteOp, uniqueUser } from './helpers.js';
import { fcParams, TEST_SEED } from '../unit/seed.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-model-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const seed = TEST_SEED;

const command = fc.record({ client: fc.integer({ min: 0, max: 2 }), delta: fc.integer({ min: -3, max: 2 }), length: fc.integer({ min: 1, max: 4 }) });

async function check(store: ServerStore, commands: { client: number; delta: number; length: number }[], pageSize: number): Promise<void> {
  const userId = uniqueUser('model');
  const ops: Op[][] = [0, 1, 2].map((c) => Array.from({ length: 200 }, (_, i) => noteOp(userId, `s${c}`, i + 1)));
  const last = [0, 0, 0];
  const log: string[] = [];
  for (const { client, delta, length } of commands) {
    const from = Math.max(1, last[client]! + 1 + delta);
    const items = Array.from({ length }, (_, i) => ({ seq: from + i, op: ops[client]![from + i - 1]! }));
    const result = await store.push(userId, `c${client}`, items);
    const fresh = items.filter((item) => item.seq > last[client]!);
    if (fresh.length > 0 && fresh[0]!.seq !== last[client]! + 1) {
      expect(result).toEqual({ status: 'gap', lastSeq: last[client] });
      continue;
    }
    log.push(...fresh.map((item) => item.op.id));
    last[client] = Math.max(last[client]!, from + length - 1);
    expect(result).toEqual({ status: 'applied', lastSeq: last[client], appended: fresh.length, head: log.length });
  }
  const pulled: string[] = [];
  let after = 0;
  for (;;) {
    const page = await store.pull(userId, after, pageSize);
    pulled.push(...page.items.map(decodePulled).map((item) => ('op' in item ? item.op.id : 'board')));
    if (page.items.length > 0) after = page.items[page.items.length - 1]!.position;
    if (!page.more) break;
  }
  expect(pulled).toEqual(log);
  for (const c of [0, 1, 2]) expect(await store.lastSeq(userId, `c${c}`)).toBe(last[c]);
}

describe(`store model (seed ${seed}; replay with TABULA_SEED=${seed})`, () => {
  it('sqliteStore follows the model', async () => {
    const store = sqliteStore(path.join(dir, 'model.db'));
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 7 }), (commands, pageSize) => check(store, commands, pageSize)),
      fcParams(50),
    );
    await store.close();
  }, 120_000);

  it('postgresStore follows the model', async () => {
    const store = postgresStore(inject('postgresUrl'));
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 25 }), fc.integer({ min: 1, max: 7 }), (commands, pageSize) => check(store, commands, pageSize)),
      fcParams(15),
    );
    await store.close();
  }, 120_000);
});
