/**
 * The append path of applyOps (applyInOrder, applyAppends, settle, touch): a run of appends to one
 * session is applied as one batch, and must leave what applying its ops one by one leaves. Each
 * scenario mixes what a batch must get right and a single op cannot show: appends out of order within
 * the batch, a replay beside new appends, a message removed then appended in the same batch, an append
 * that names a later life among appends of this one, an append that changes nothing but still moves
 * the session's clock, and a known session row that another writer made stale.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Op } from '../../../../src/core/index.js';
import { applyOps, StaleKnownRow, type ApplyOptions } from '../../../../src/store/apply/index.js';
import { createKnownRows } from '../../../../src/store/known-rows.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { uniqueName } from '../helpers.js';
import { append, at, BASE_MS, closeReplicas, converge, create, op, openReplica, replica, SESSION, USER, view } from '../replicas.js';

afterEach(closeReplicas);

/** `o` as written in the life that began after the delete at `after` ('' for the first life). */
const inLife = (after: string, o: Op): Op => ({ ...o, after });
const remove = (order: string, id: string) => op('message.remove', order, { id });
const ids = (ops: readonly Op[]) => ops.map((o) => o.id);

/**
 * Applies `before`, then `batch` at once to one replica and one op at a time to another: both must list
 * the same ops as applied and show the same session. Returns what the batch listed and the replica's name.
 */
async function batchAsOneByOne(before: Op[], batch: Op[]): Promise<{ applied: Op[]; name: string }> {
  const atOnce = await replica(before, batch);
  const oneByOne = await replica(before, ...batch.map((o) => [o]));
  expect(ids(atOnce.applied[1] ?? [])).toEqual(ids(oneByOne.applied.slice(1).flat()));
  expect(await view(atOnce.name)).toEqual(await view(oneByOne.name));
  return { applied: atOnce.applied[1] ?? [], name: atOnce.name };
}

function applyIn(db: TabulaDb, ops: readonly Op[], options?: ApplyOptions): Promise<Op[]> {
  return db.transaction('rw', sessionTables(db), async () => applyOps(db, ops, options));
}

describe('applyOps: a batch of appends', () => {
  it('no ops: nothing applied', async () => {
    const db = createDb(uniqueName('empty'));
    try {
      expect(await applyIn(db, [])).toEqual([]);
    } finally {
      db.close();
    }
  });

  it('appends out of order within one batch drop the running token total they land before', async () => {
    const name = uniqueName('batch-tokens');
    const first = [create(at(1)), append(at(10), 'm10', 'ten ten ten ten ten')];
    const db = createDb(name);
    await applyIn(db, first);
    db.close();
    // Counting caches a running total up to m10 on the session row (close() waits for it to be written).
    const tabula = await openReplica(name);
    await (await tabula.session(SESSION)).tokens();
    await closeReplicas();
    const again = createDb(name);
    const row = await again.sessions.get([USER, SESSION]);
    expect(Object.values(row?.tokenTotals ?? {}).map((totals) => totals.upTo)).toEqual([at(10)]);
    // Only the middle append of the batch sorts before the total: the total must go.
    const late = [append(at(20), 'm20', 'twenty'), append(at(5, 'b'), 'm5', 'a late message from another device, ordered before the total'), append(at(30), 'm30', 'thirty')];
    expect(ids(await applyIn(again, late))).toEqual(ids(late));
    again.close();
    const fresh = await view((await replica([...first, ...late])).name);
    expect(fresh?.messageCount).toBe(4);
    expect((await view(name))?.tokens).toBe(fresh?.tokens);
  });

  it('a replayed append beside new ones is refused alone: the new ones land and are counted once', async () => {
    const m1 = append(at(2), 'm1');
    const { name, applied } = await batchAsOneByOne([create(at(1)), m1], [append(at(4), 'm3'), m1, append(at(3), 'm2')]);
    expect(applied.map((o) => (o.body as { id: string }).id)).toEqual(['m3', 'm2']);
    const shown = await view(name);
    expect(shown?.messages).toEqual(['m1:complete:m1', 'm2:complete:m2', 'm3:complete:m3']);
    expect(shown?.info.messageCount).toBe(3);
    expect(shown?.messageCount).toBe(3);
  });

  it('a message removed and appended in one batch stays out; the other appends of the batch land', async () => {
    const { name, applied } = await batchAsOneByOne([create(at(1))], [remove(at(3), 'm2'), append(at(1, 'b'), 'm1'), append(at(2), 'm2'), append(at(4), 'm4')]);
    expect(applied.map((o) => (o.body as { id: string }).id)).toEqual(['m2', 'm1', 'm4']);
    const shown = await view(name);
    expect(shown?.messages).toEqual(['m1:complete:m1', 'm4:complete:m4']);
    expect(shown?.info.messageCount).toBe(2);
  });

  it('appends that stay out (their message was removed) still move lastOrder, and updatedAt unless streaming', async () => {
    // A stream's chunk stays local (isSynced): it moves lastOrder, for this browser's next writes, but not
    // updatedAt; another device's append ordered before the chunk then moves updatedAt alone.
    const { name, applied } = await replica([create(at(1)), remove(at(3), 'm2')], [append(at(12), 'm2', 'chunk', 'streaming')], [append(at(10, 'b'), 'm2')]);
    expect(applied.slice(1)).toEqual([[], []]);
    const db = createDb(name);
    const row = await db.sessions.get([USER, SESSION]);
    db.close();
    expect(row?.lastOrder).toBe(at(12));
    expect(row?.updatedAt).toBe(BASE_MS + 10);
    expect((await view(name))?.messages).toEqual([]);
  });

  it('an append naming a life only the tombstone can place ends this life: the appends before it land, it and those after do not', async () => {
    // b deleted the session at 3 and made it again; this replica has not heard of that delete yet.
    const thisLife = [inLife('', create(at(1))), inLife('', append(at(2), 'm1'))];
    const run = [inLife('', append(at(2, 'c'), 'm2')), inLife(at(3, 'b'), append(at(5, 'b'), 'new')), inLife('', append(at(2, 'd'), 'm3'))];
    const { name, applied } = await batchAsOneByOne(thisLife, run);
    expect(applied).toEqual([run[0]]);
    expect(await view(name)).toBeNull();
  });

  it('an append of a newer life to a session this replica does not have proves that life\'s delete, as any op does (bug: the batch dropped it)', async () => {
    // b deleted the session at 3 and made it again; its append reaches this replica before the create of the first life.
    const newer = inLife(at(3, 'b'), append(at(5, 'b'), 'new'));
    const { expected, late } = await converge([[newer, inLife(at(3, 'b'), append(at(6, 'b'), 'newer'))], [inLife('', create(at(1)))]]);
    expect(expected).toBeNull();
    expect(late.applied).toEqual([[], []]);
    // Beside an append that names no life (a device from before lives were named), the same.
    const unnamed = append(at(4, 'c'), 'legacy');
    expect((await converge([[unnamed, newer], [inLife('', create(at(1)))]])).expected).toBeNull();
  });
});

describe('applyOps on known session rows', () => {
  it('a known row that another writer changed since: StaleKnownRow, and nothing of the batch lands', async () => {
    const name = uniqueName('stale-known');
    const db = createDb(name);
    try {
      await applyIn(db, [create(at(1)), append(at(2), 'm1')]);
      const known = createKnownRows();
      const settled: NonNullable<ApplyOptions['settled']> = [];
      await applyIn(db, [append(at(3), 'm2')], { known, settled });
      expect(settled.map((entry) => entry.row?.messageCount)).toEqual([2]);
      known.set(USER, SESSION, settled[0]?.row);
      // Nobody wrote since: the known row holds, and the batch lands on it.
      expect(ids(await applyIn(db, [append(at(3, 'c'), 'm2c')], { known, settled }))).toHaveLength(1);
      expect(settled.at(-1)?.row?.messageCount).toBe(3);
      known.set(USER, SESSION, settled.at(-1)?.row);
      // Another tab appends behind this one's back; the known row is now one message short.
      await applyIn(db, [append(at(4, 'b'), 'theirs')]);
      await expect(applyIn(db, [append(at(5), 'm3')], { known })).rejects.toBeInstanceOf(StaleKnownRow);
      expect((await db.messages.toArray()).map((m) => m.id)).toEqual(['m1', 'm2', 'm2c', 'theirs']);
      // Again from the stored row, as the sync client retries: it lands, counted on the stored count.
      expect(await applyIn(db, [append(at(5), 'm3')])).toHaveLength(1);
      expect((await db.sessions.get([USER, SESSION]))?.messageCount).toBe(5);
    } finally {
      db.close();
    }
  });

  it('a known row of a session another writer deleted since: StaleKnownRow, the session stays gone', async () => {
    const name = uniqueName('deleted-known');
    const db = createDb(name);
    try {
      const settled: NonNullable<ApplyOptions['settled']> = [];
      await applyIn(db, [create(at(1)), append(at(2), 'm1')], { settled });
      const known = createKnownRows();
      known.set(USER, SESSION, settled[0]?.row);
      await applyIn(db, [op('session.delete', at(3, 'b'), {})]);
      await expect(applyIn(db, [append(at(4), 'm2')], { known })).rejects.toBeInstanceOf(StaleKnownRow);
      expect(await db.sessions.count()).toBe(0);
      expect(await db.messages.count()).toBe(0);
    } finally {
      db.close();
    }
  });
});

describe('applyOps: a batch that fails', () => {
  it('a batch that fails on a stored row it cannot apply to rejects, and nothing of it lands', async () => {
    const name = uniqueName('corrupt-row');
    const db = createDb(name);
    try {
      await applyIn(db, [create(at(1)), append(at(2), 'm1')]);
      // As foreign code or a bug could leave it: a row whose cached totals are not an object.
      await db.sessions.update([USER, SESSION], (row) => {
        (row as unknown as { tokenTotals: unknown }).tokenTotals = null;
      });
      await expect(applyIn(db, [op('memory.set', at(3), { scope: 'default', key: 'k', value: 1 }), append(at(4), 'm2')])).rejects.toThrow();
      expect((await db.messages.toArray()).map((m) => m.id)).toEqual(['m1']);
      expect(await db.memory.count()).toBe(0);
    } finally {
      db.close();
    }
  });
});
