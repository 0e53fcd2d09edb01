/**
 * The read session() makes (open-read.ts): the session row and what crash
 * recovery looks for, in one native readonly transaction, with Dexie as the
 * fallback when the native connection is closed. And the guarantee it
 * serves: a message left `streaming` by a crashed instance is reported
 * `interrupted` before the first read of a new instance can return it.
 * Seeded (test/unit/seed.ts): the seed is printed; TABULA_SEED=<n> replays it (Node).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readSessionOpen } from '../../../src/store/open-read.js';
import { createDb, messageRow, type MessageRow, type RunRow } from '../../../src/store/schema.js';
import { fcParams, TEST_SEED } from '../seed.js';
import { freshTabula, uniqueName } from './helpers.js';


const run = (runId: string, sessionId: string, status: RunRow['status']): RunRow => ({
  runId,
  userId: 'u',
  sessionId,
  scope: 'default',
  visit: 1,
  attempt: 1,
  status,
  startedAt: 1,
  endedAt: status === 'running' ? null : 2,
});

const message = (id: string, sessionId: string, status: MessageRow['status']): MessageRow =>
  messageRow({ id, userId: 'u', sessionId, order: `000000000000001.000000.${id}`, createdAt: 1, status, message: { role: 'assistant', content: id } });

const ids = (rows: readonly { id?: string; runId?: string }[]) => rows.map((row) => row.id ?? row.runId).sort();

describe('readSessionOpen', () => {
  it('reads the row and only this session’s running runs and streaming messages, natively and through Dexie alike', async () => {
    const db = createDb(uniqueName('open-read'));
    try {
      const row = { userId: 'u', sessionId: 's', marker: 'as stored, not validated here' };
      await db.sessions.put(row as never);
      await db.runs.bulkPut([run('r1', 's', 'running'), run('r2', 's', 'succeeded'), run('r3', 's', 'running'), run('r4', 'other', 'running')]);
      await db.messages.bulkPut([
        message('m1', 's', 'streaming'),
        message('m2', 's', 'complete'),
        message('m3', 's', 'interrupted'),
        message('m4', 'other', 'streaming'),
        message('m5', 's', 'streaming'),
      ]);
      expect(db.isOpen()).toBe(true);
      const native = await readSessionOpen(db, 'u', 's');
      expect(native.row).toEqual(row);
      expect(ids(native.unfinished.runs)).toEqual(['r1', 'r3']);
      expect(ids(native.unfinished.streams)).toEqual(['m1', 'm5']);

      // As after another connection's upgrade: Dexie closed the native connection and reopens it on use.
      db.close({ disableAutoOpen: false });
      expect(db.isOpen()).toBe(false);
      const viaDexie = await readSessionOpen(db, 'u', 's');
      expect(viaDexie).toEqual(native);
      expect(db.isOpen()).toBe(true);

      expect(await readSessionOpen(db, 'u', 'missing')).toEqual({ row: undefined, unfinished: { runs: [], streams: [] } });
    } finally {
      db.close();
    }
  });
});

describe('a new instance never reads a stream a crashed instance left behind (property)', () => {
  it(`its first messages({ last }) has the crashed streams interrupted, text kept, and its first runs() the runs abandoned (seed ${TEST_SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 0, max: 3 }),
        async (count, streamingPicks, last, runningRuns) => {
          const name = uniqueName('crashed');
          // The instance that crashes: it wrote the messages, then died with some of them mid-stream and runs in flight.
          const crashed = await freshTabula({ name, userId: 'u' });
          const written = await (await crashed.session('s')).append(Array.from({ length: count }, (_, i) => ({ role: 'assistant' as const, content: `text ${i}` })));
          await crashed.close();
          const streaming = new Set(streamingPicks.map((pick) => written[pick % count]!.id));
          const raw = createDb(name);
          // As a stream leaves its row: status 'streaming' with the marker the stream index reads.
          for (const id of streaming) await raw.messages.update(['u', 's', id], { status: 'streaming', streaming: 1 });
          await raw.runs.bulkPut(Array.from({ length: runningRuns }, (_, i) => run(`orphan-${i}`, 's', 'running')));
          raw.close();

          const fresh = await freshTabula({ name, userId: 'u' });
          try {
            const session = await fresh.session('s');
            const read = await session.messages({ last });
            const expected = written.slice(-last);
            expect(read.map((m) => m.id)).toEqual(expected.map((m) => m.id));
            for (const [index, m] of read.entries()) {
              expect(m.status).toBe(streaming.has(m.id) ? 'interrupted' : 'complete');
              expect(m.content).toBe(expected[index]!.content);
            }
            expect((await session.runs()).map((r) => r.status)).toEqual(Array.from({ length: runningRuns }, () => 'abandoned'));
            expect(fresh.reported).toEqual([]);
          } finally {
            await fresh.close();
          }
        },
      ),
      // Every run, however slow the machine: a time limit would check fewer cases under load, and pass.
      fcParams(25),
    );
  }, 600_000);
});
