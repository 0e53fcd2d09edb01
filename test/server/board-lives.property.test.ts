/**
 * Board updates of several session lives through a store (property, on
 * SQLite and PostgreSQL): three clients push board updates of one session,
 * mostly to its newest life, sometimes starting a newer one (a delete and
 * a create again), sometimes late to an older one (a device that has not
 * heard of the delete), under a random compaction threshold; readers pull
 * at random points with random page sizes and apply an update only to the
 * life it names, as the sync client does. Every reader, and a fresh one at
 * the end, must hold exactly the newest life's board: nothing of an older
 * life, nothing of the newest lost. Prints its seed; `TABULA_SEED=n`
 * replays one.
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import * as Y from 'yjs';
import { makeOp } from '../../src/core/index.js';
import { postgresStore, sqliteStore, type ServerStore, type StoreOptions, type StorePushItem } from '../../src/server/index.js';
import { fcParams, TEST_SEED } from '../unit/seed.js';
import { boardWriter, decodePulled, uniqueUser } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-board-lives-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const seed = TEST_SEED;

type Step = { kind: 'push'; client: number; life: 'newest' | 'newer' | 'older' } | { kind: 'read'; reader: number; pageSize: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('push' as const), client: fc.integer({ min: 0, max: 2 }), life: fc.constant('newest' as const) }), weight: 6 },
  fc.record({ kind: fc.constant('push' as const), client: fc.integer({ min: 0, max: 2 }), life: fc.constantFrom('newer' as const, 'older' as const) }),
  { arbitrary: fc.record({ kind: fc.constant('read' as const), reader: fc.integer({ min: 0, max: 1 }), pageSize: fc.integer({ min: 1, max: 5 }) }), weight: 2 },
);

/** The `after` of life `index`: '' for the first, then delete order keys that sort in index order. */
function lifeAfter(index: number): string {
  return index === 0 ? '' : `0017000000000${String(index).padStart(2, '0')}.000000.d`;
}

/**
 * A device that pulls: it learns of a new life from the ops that start it (here: the position where the
 * life's first update was pushed, which its delete and create precede), and applies an update only to
 * the life the update names, when that is the life it is in.
 */
function reader(lifeStarts: readonly number[]) {
  let cursor = 0;
  let life = 0;
  let doc = new Y.Doc();
  return {
    async pull(store: ServerStore, userId: string, pageSize: number): Promise<void> {
      for (;;) {
        const page = await store.pull(userId, cursor, pageSize, Number.MAX_SAFE_INTEGER);
        for (const item of page.items.map(decodePulled)) {
          // The ops of lives that started up to here have been applied: the session is of the newest of them.
          const now = lifeStarts.filter((start) => start <= item.position).length - 1;
          if (now > life) {
            life = now;
            doc = new Y.Doc();
          }
          if ('board' in item && item.board.after === lifeAfter(life)) Y.applyUpdate(doc, item.board.update);
          cursor = item.position;
        }
        if (!page.more) return;
      }
    },
    board: () => doc.getMap('board').toJSON(),
  };
}

async function check(open: (options: StoreOptions) => ServerStore, steps: Step[], compactBoardAfter: number): Promise<void> {
  const store = open({ compactBoardAfter });
  try {
    const userId = uniqueUser('lives');
    const lives = [boardWriter()];
    const lifeStarts = [0];
    const seqs = [0, 0, 0];
    let head = 0;
    let written = 0;
    const readers = [reader(lifeStarts), reader(lifeStarts)];
    for (const step of steps) {
      if (step.kind === 'read') {
        await readers[step.reader]!.pull(store, userId, step.pageSize);
        continue;
      }
      // A newer life begins with the delete that a store requires before any board names it.
      const items: StorePushItem[] = [];
      if (step.life === 'newer') {
        lives.push(boardWriter());
        lifeStarts.push(head + 1);
        items.push({ seq: ++seqs[step.client]!, op: makeOp('session.delete', { id: randomUUID(), userId, sessionId: 's1', order: lifeAfter(lives.length - 1), body: {} }) });
      }
      const index = step.life === 'older' ? Math.max(0, lives.length - 2) : lives.length - 1;
      const update = lives[index]!.write(`k${++written}`, `life ${index}`);
      items.push({ seq: ++seqs[step.client]!, board: { sessionId: 's1', update, after: lifeAfter(index) } });
      const result = await store.push(userId, `c${step.client}`, items);
      expect(result.status).toBe('applied');
      head += items.length;
    }
    const newest = lives.at(-1)!.doc.getMap('board').toJSON();
    const fresh = reader(lifeStarts);
    for (const each of [...readers, fresh]) {
      await each.pull(store, userId, 1000);
      expect(each.board()).toEqual(newest);
    }
    // What the store keeps of older lives (if anything) is never merged into the newest life's updates.
    const stored = (await store.pull(userId, 0, 1000, Number.MAX_SAFE_INTEGER)).items.map(decodePulled);
    const newestUpdates = stored.flatMap((item) => ('board' in item && item.board.after === lifeAfter(lives.length - 1) ? [item.board.update] : []));
    const merged = new Y.Doc();
    for (const update of newestUpdates) Y.applyUpdate(merged, update);
    expect(merged.getMap('board').toJSON()).toEqual(newest);
  } finally {
    await store.close();
  }
}

const property = (open: (options: StoreOptions) => ServerStore) =>
  fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 5 }), (steps, compactBoardAfter) => check(open, steps, compactBoardAfter));

describe(`board updates of several session lives (seed ${seed}; replay with TABULA_SEED=${seed})`, () => {
  it('sqliteStore: every reader ends with exactly the newest life\'s board', async () => {
    let n = 0;
    await fc.assert(
      property((options) => sqliteStore(path.join(dir, `lives-${++n}.db`), options)),
      fcParams(40),
    );
  }, 120_000);

  it('postgresStore: every reader ends with exactly the newest life\'s board', async () => {
    await fc.assert(
      property((options) => postgresStore(inject('postgresUrl'), options)),
      fcParams(12),
    );
  }, 120_000);
});
