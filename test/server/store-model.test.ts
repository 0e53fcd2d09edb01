/**
 * Seeded model test of the store contract: random pushes of several clients
 * (retries, overlaps, gaps; ops, session deletes, ops written in a life,
 * board updates naming session lives begun or not) against a few lines of reference model, then
 * paged pulls of random size and random byte budget. Any store bug in the
 * seq rules, the life rules, dropping older lives, the log order or paging
 * shows up as a difference from the model, byte for byte. Prints its seed;
 * `TABULA_SEED=n` replays one.
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { makeOp } from '../../src/core/index.js';
import { postgresStore, sqliteStore, type ServerStore, type StorePushItem } from '../../src/server/index.js';
import { boardWriter, noteOp, orderKey, uniqueUser } from './helpers.js';
import { fcParams, TEST_SEED } from '../unit/seed.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-model-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const seed = TEST_SEED;

/** Lives a delete may begin, in code-unit order ('B' < '_' < 'a'); a board may also name '' or none. */
const LIVES = [orderKey(1, 'B'), orderKey(1, '_'), orderKey(1, 'a')];
const SESSIONS = ['s0', 's1'];

type ItemSpec = { kind: 'op' } | { kind: 'delete' | 'named'; session: number; life: number } | { kind: 'board'; session: number; life: number | 'first' | 'none' };
const itemSpec: fc.Arbitrary<ItemSpec> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'op' as const }) },
  // An op written in a life, by a device whose delete never reached the store: it begins the life too.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('named' as const), session: fc.integer({ min: 0, max: 1 }), life: fc.integer({ min: 0, max: 2 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), session: fc.integer({ min: 0, max: 1 }), life: fc.integer({ min: 0, max: 2 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('board' as const), session: fc.integer({ min: 0, max: 1 }), life: fc.oneof(fc.integer({ min: 0, max: 2 }), fc.constantFrom('first' as const, 'none' as const)) }),
  },
);
const command = fc.record({ client: fc.integer({ min: 0, max: 2 }), delta: fc.integer({ min: -3, max: 2 }), specs: fc.array(itemSpec, { minLength: 1, maxLength: 4 }) });
const pull = fc.record({ pageSize: fc.integer({ min: 1, max: 7 }), maxBytes: fc.oneof(fc.integer({ min: 0, max: 700 }), fc.constant(Number.MAX_SAFE_INTEGER)) });

/** An item of the model's log: its position, what it names, and the wire JSON a pull must return for it. */
interface Logged {
  position: number;
  board?: { session: string; after: string | undefined };
  json: string;
}

function itemOf(userId: string, spec: ItemSpec, seq: number, client: number): StorePushItem {
  if (spec.kind === 'op') return { seq, op: noteOp(userId, `s${client}`, seq) };
  if (spec.kind === 'named') return { seq, op: { ...noteOp(userId, SESSIONS[spec.session]!, seq), after: LIVES[spec.life]! } };
  if (spec.kind === 'delete') return { seq, op: makeOp('session.delete', { id: randomUUID(), userId, sessionId: SESSIONS[spec.session]!, order: LIVES[spec.life]!, body: {} }) };
  const update = boardWriter().write(`k${seq}`, 'v');
  const sessionId = SESSIONS[spec.session]!;
  if (spec.life === 'none') return { seq, board: { sessionId, update } };
  return { seq, board: { sessionId, update, after: spec.life === 'first' ? '' : LIVES[spec.life]! } };
}

function wireOf(clientId: string, item: StorePushItem): string {
  if ('op' in item) return JSON.stringify({ clientId, op: item.op });
  return JSON.stringify({ clientId, board: { sessionId: item.board.sessionId, update: Buffer.from(item.board.update).toString('base64'), after: item.board.after } });
}

async function check(store: ServerStore, commands: { client: number; delta: number; specs: ItemSpec[] }[], pulls: { pageSize: number; maxBytes: number }[]): Promise<void> {
  const userId = uniqueUser('model');
  const last = [0, 0, 0];
  let log: Logged[] = [];
  let head = 0;
  const begun = new Map<string, Set<string>>(SESSIONS.map((session) => [session, new Set()]));
  for (const { client, delta, specs } of commands) {
    const from = Math.max(1, last[client]! + 1 + delta);
    // A retried seq may carry other content than the first time: the store goes by seq and ignores it.
    const items = specs.map((spec, i) => itemOf(userId, spec, from + i, client));
    const result = await store.push(userId, `c${client}`, items);
    const fresh = items.map((item, index) => ({ item, index })).filter(({ item }) => item.seq > last[client]!);
    if (fresh.length > 0 && fresh[0]!.item.seq !== last[client]! + 1) {
      expect(result).toEqual({ status: 'gap', lastSeq: last[client] });
      continue;
    }
    // Guarantee 9: a named life must be begun by a stored delete or an earlier new item of the push.
    const starting = new Set<string>();
    const unknown = fresh.find(({ item }) => {
      if ('op' in item) {
        if (item.op.kind === 'session.delete') starting.add(JSON.stringify([item.op.sessionId, item.op.order]));
        if (item.op.after !== undefined) starting.add(JSON.stringify([item.op.sessionId, item.op.after]));
        return false;
      }
      const { sessionId, after } = item.board;
      return after !== undefined && after !== '' && !begun.get(sessionId)!.has(after) && !starting.has(JSON.stringify([sessionId, after]));
    });
    if (unknown) {
      expect(result).toEqual({ status: 'unknown-life', index: unknown.index });
      continue;
    }
    const touched = new Set<string>();
    for (const { item } of fresh) {
      head++;
      if ('op' in item && item.op.kind === 'session.delete') begun.get(item.op.sessionId)!.add(item.op.order);
      if ('op' in item && item.op.after !== undefined) begun.get(item.op.sessionId)!.add(item.op.after);
      if ('board' in item) touched.add(item.board.sessionId);
      log.push({ position: head, json: wireOf(`c${client}`, item), ...('board' in item ? { board: { session: item.board.sessionId, after: item.board.after } } : {}) });
    }
    // Guarantee 6: boards of lives older than the newest begun one are dropped, in code-unit order.
    for (const session of touched) {
      const newest = [...begun.get(session)!].sort().at(-1);
      if (newest !== undefined) log = log.filter((item) => item.board?.session !== session || item.board.after === undefined || item.board.after >= newest);
    }
    last[client] = Math.max(last[client]!, from + items.length - 1);
    expect(result).toEqual({ status: 'applied', lastSeq: last[client], appended: fresh.length, head });
  }
  // Paged pulls with the byte rule: the first item always, then stop before the one that passes the budget.
  let after = 0;
  let k = 0;
  for (;;) {
    const { pageSize, maxBytes } = pulls[k++ % pulls.length]!;
    const rest = log.filter((item) => item.position > after);
    const expected: Logged[] = [];
    let bytes = 0;
    for (const item of rest) {
      bytes += Buffer.byteLength(item.json);
      if (expected.length === pageSize || (expected.length > 0 && bytes > maxBytes)) break;
      expected.push(item);
    }
    const page = await store.pull(userId, after, pageSize, maxBytes);
    expect({ pageSize, maxBytes, items: page.items, more: page.more }).toEqual({
      pageSize,
      maxBytes,
      items: expected.map(({ position, json }) => ({ position, json })),
      more: expected.length < rest.length,
    });
    if (page.items.length > 0) after = page.items.at(-1)!.position;
    if (!page.more) break;
  }
  for (const c of [0, 1, 2]) expect(await store.lastSeq(userId, `c${c}`)).toBe(last[c]);
}

// No merging: this model keeps every update; compaction's merge has tests of its own.
const options = { compactBoardAfter: 1_000_000 };

describe(`store model (seed ${seed}; replay with TABULA_SEED=${seed})`, () => {
  it('sqliteStore follows the model', async () => {
    const store = sqliteStore(path.join(dir, 'model.db'), options);
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 40 }), fc.array(pull, { minLength: 1, maxLength: 5 }), (commands, pulls) => check(store, commands, pulls)),
      fcParams(50),
    );
    await store.close();
  }, 120_000);

  for (const [name, url, runs] of [
    ['postgresStore', inject('postgresUrl'), 15],
    ['postgresStore on an ICU en-US database', inject('postgresIcuUrl'), 8],
  ] as const) {
    it(`${name} follows the model`, async () => {
      const store = postgresStore(url, options);
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 25 }), fc.array(pull, { minLength: 1, maxLength: 5 }), (commands, pulls) => check(store, commands, pulls)),
        fcParams(runs),
      );
      await store.close();
    }, 120_000);
  }
});
