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
import { readMessageRows, readSessionOpen } from '../../../src/store/open-read.js';
import { createDb } from '../../../src/store/db/schema.js';
import { messageRow, type MessageRow, type RunRow } from '../../../src/store/db/rows.js';
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
      expect(viaDexie.tx).toBeNull();
      expect({ ...viaDexie, tx: 'either' }).toEqual({ ...native, tx: 'either' });
      expect(db.isOpen()).toBe(true);

      const missing = await readSessionOpen(db, 'u', 'missing');
      expect({ row: missing.row, unfinished: missing.unfinished }).toEqual({ row: undefined, unfinished: { runs: [], streams: [] } });
    } finally {
      db.close();
    }
  });
});

describe('readMessageRows', () => {
  it('reads all of a session’s messages or its last n, in order, natively, in a live session() read and through Dexie alike', async () => {
    const db = createDb(uniqueName('message-rows'));
    try {
      // Written out of order, with another session's rows on both sides of the range.
      const rows = [5, 1, 4, 0, 3, 2].map((i) => messageRow({ id: `m${i}`, userId: 'u', sessionId: 's', order: `00${i}`, createdAt: i, status: 'complete', message: { role: 'user', content: `${i}` } }));
      await db.messages.bulkPut([...rows, message('x1', 'r', 'complete'), message('x2', 't', 'complete'), message('x3', 'other', 'complete')]);
      const ids = (got: unknown[]) => got.map((row) => (row as MessageRow).id);
      const all = ['m0', 'm1', 'm2', 'm3', 'm4', 'm5'];
      const expectReads = async (reuse: () => Promise<IDBTransaction | null>) => {
        expect(ids(await readMessageRows(db, 'u', 's', undefined, await reuse()))).toEqual(all);
        for (const last of [0, 1, 2, 5, 6, 7, 1000]) expect(ids(await readMessageRows(db, 'u', 's', last, await reuse()))).toEqual(all.slice(Math.max(0, all.length - last)));
        expect(await readMessageRows(db, 'u', 'missing', 3, await reuse())).toEqual([]);
      };
      // In a new transaction, and in session()'s read: still alive when the read is made in the same turn.
      await expectReads(async () => null);
      await expectReads(async () => (await readSessionOpen(db, 'u', 's')).tx);
      // In a transaction that has finished: the read goes to a new one.
      const finished = (await readSessionOpen(db, 'u', 's')).tx;
      await new Promise((resolve) => setTimeout(resolve, 0));
      await db.messages.put(messageRow({ id: 'm6', userId: 'u', sessionId: 's', order: '006', createdAt: 6, status: 'complete', message: { role: 'user', content: '6' } }));
      expect(ids(await readMessageRows(db, 'u', 's', 2, finished))).toEqual(['m5', 'm6']);
      all.push('m6');
      // Through Dexie, where the native connection is closed (Dexie reopens it).
      const viaDexie = async () => {
        db.close({ disableAutoOpen: false });
        return null;
      };
      await expectReads(viaDexie);
    } finally {
      db.close();
    }
  });
});

describe('a read made in the transaction session() read in sees every commit made before it (property)', () => {
  it(`another instance's appends that resolved before messages() was called are all in it (seed ${TEST_SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.record({ appends: fc.integer({ min: 0, max: 3 }), wait: fc.boolean(), last: fc.integer({ min: 1, max: 8 }) }), { minLength: 1, maxLength: 8 }), async (steps) => {
        const name = uniqueName('reuse');
        const writer = await freshTabula({ name, userId: 'u' });
        const reader = await freshTabula({ name, userId: 'u' });
        try {
          const inWriter = await writer.session('s');
          const resolved: { id: string; order: string }[] = [];
          const pending: Promise<unknown>[] = [];
          for (const { appends, wait, last } of steps) {
            for (let k = 0; k < appends; k++) {
              // Some appends are still in flight while the reader opens and reads: they may or may not show.
              const append = inWriter.append({ role: 'user', content: 'x' }).then(([stored]) => resolved.push({ id: stored!.id, order: stored!.order }));
              if (wait) await append;
              else pending.push(append);
            }
            const committed = [...resolved];
            // session() and messages() in one turn: the read is made in session()'s transaction when it is alive.
            const read = await (await reader.session('s')).messages({ last });
            expect(read.length).toBeLessThanOrEqual(last);
            expect(read.map((m) => m.order)).toEqual(read.map((m) => m.order).sort());
            // Every append that resolved before the read is in it, unless last n newer messages crowd it out.
            const ids = new Set(read.map((m) => m.id));
            for (const c of committed) if (read.length < last || c.order >= read[0]!.order) expect(ids).toContain(c.id);
          }
          await Promise.all(pending);
          expect(writer.reported).toEqual([]);
          expect(reader.reported).toEqual([]);
        } finally {
          await writer.close();
          await reader.close();
        }
      }),
      fcParams(25),
    );
  }, 600_000);
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
