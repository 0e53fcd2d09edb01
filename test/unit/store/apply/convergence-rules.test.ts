/**
 * Convergence rules of the one write path for four faults of issue 26, op by op: a restore and a
 * remove ordered after it (the message stays removed, whichever arrives first); two copies of one
 * message at one order key (every replica keeps the same one); a save replaced by one not built on it
 * (reported, whatever the versions); a delete that drops work its deleter never saw (named). Then the
 * same faults through the public API: two imports of one export into one id, applied crosswise as sync
 * would, and two tabs, one of which deletes and re-creates a session the other holds a handle to.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseOp, type Op } from '../../../../src/core/index.js';
import { SEEN_MAX } from '../../../../src/core/ops.js';
import { openTabula, type SessionExport, type Tabula } from '../../../../src/index.js';
import { applyOps, deleteBody, type DroppedWork, type SaveConflict } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables, userOutbox } from '../../../../src/store/db/schema.js';
import { type SessionRow } from '../../../../src/store/db/rows.js';
import type { SyncAdapter } from '../../../../src/store/replication/contract.js';
import { freshTabula, uniqueName } from '../helpers.js';
import { append, at, closeReplicas, converge, create, memorySet, op, replica, snapshotOf, USER, SESSION, view } from '../replicas.js';

afterEach(closeReplicas);

const remove = (order: string, id: string) => op('message.remove', order, { id });
const checkpoint = (order: string, messages: { id: string; order: string }[]) =>
  op('checkpoint.create', order, { id: 'cp1', label: null, at: 1, snapshot: snapshotOf(messages) });
const restore = (order: string, version: number, base?: string) => op('checkpoint.restore', order, { id: 'cp1', version, ...(base === undefined ? {} : { base }) });
const state = (tasks: string) => ({ summary: null, tasks, plan: null, permissions: null, tools: [], context: {} });
const saved = (order: string, version: number, tasks: string, base?: string) =>
  op('state.save', order, { version, patch: state(tasks), ...(base === undefined ? {} : { base }) });

/** Applies `batches` to a fresh database, one transaction each, collecting what applyOps reports. */
async function reporting(...batches: Op[][]): Promise<{ conflicts: SaveConflict[]; dropped: DroppedWork[] }> {
  const db = createDb(uniqueName('rules'));
  const conflicts: SaveConflict[] = [];
  const dropped: DroppedWork[] = [];
  for (const batch of batches) await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch, { conflicts, dropped }));
  db.close();
  return { conflicts, dropped };
}

describe('a restore and a remove of a message it restores', () => {
  const before = [create(at(1)), append(at(2), 'kept'), append(at(3), 'removed'), checkpoint(at(4), [{ id: 'kept', order: at(2) }, { id: 'removed', order: at(3) }])];

  it('a remove ordered after the restore keeps the message out, whichever arrives first', async () => {
    // Device b restores at 6; device a, which has not seen the restore, removes at 7.
    const { expected } = await converge([before, [remove(at(7), 'removed')], [restore(at(6, 'b'), 1)]]);
    expect(expected?.messages).toEqual(['kept:complete:kept']);
    expect(expected?.info.messageCount).toBe(1);
  });

  it('a remove ordered before the restore leaves the restored copy, whichever arrives first', async () => {
    const { expected } = await converge([before, [restore(at(8, 'b'), 1)], [remove(at(7), 'removed')]]);
    expect(expected?.messages).toEqual(['kept:complete:kept', 'removed:complete:removed']);
  });
});

describe('two appends of one message at one order key (two imports of one history)', () => {
  const copy = (order: string, status: 'complete' | 'interrupted', content: string) =>
    op('message.append', order, { id: 'm', createdAt: 1, status, message: { role: 'assistant', content }, order: at(2, 'src') });

  it('every replica keeps the same copy, whichever arrives first: the greater status, then the greater content', async () => {
    const one = copy(at(5, 'a'), 'interrupted', 'partial');
    const two = copy(at(6, 'b'), 'complete', 'whole');
    const { expected } = await converge([[create(at(1)), two], [one]]);
    expect(expected?.messages).toEqual(['m:complete:whole']);
    const { expected: level } = await converge([[create(at(1)), copy(at(6, 'b'), 'complete', 'aaa')], [copy(at(5, 'a'), 'complete', 'zzz')]]);
    expect(level?.messages).toEqual(['m:complete:zzz']);
    expect(level?.info.messageCount).toBe(1);
  });

  it('an update ordered after the message is kept over either copy', async () => {
    const later = op('message.update', at(9, 'c'), { id: 'm', status: 'complete', message: { role: 'assistant', content: 'updated' }, order: at(2, 'src'), createdAt: 1 });
    const { expected } = await converge([[create(at(1)), copy(at(5, 'a'), 'interrupted', 'partial'), later], [copy(at(6, 'b'), 'complete', 'whole')]]);
    expect(expected?.messages).toEqual(['m:complete:updated']);
  });

  it('an append of a stored id at another order key changes nothing (the first stays)', async () => {
    const { applied, name } = await replica([create(at(1)), append(at(2), 'm', 'first')], [append(at(5, 'b'), 'm', 'second')]);
    expect(applied[1]).toEqual([]);
    expect((await view(name))?.messages).toEqual(['m:complete:first']);
  });
});

describe('a save replaced by a save not built on it is reported, whatever the versions', () => {
  const v1 = saved(at(2), 1, 'v1', '');

  it('a higher version built on another save: the save it replaces is reported, with both states', async () => {
    // Device a saved v2 and v3 on v1; device b saved its own v2 on v1, later.
    const aV2 = saved(at(3), 2, 'a v2', at(2));
    const aV3 = saved(at(4), 3, 'a v3', at(3));
    const bV2 = saved(at(6, 'b'), 2, 'b v2', at(2));
    const onB = await reporting([create(at(1)), v1, bV2], [aV2, aV3]);
    expect(onB.conflicts).toEqual([{ userId: USER, sessionId: SESSION, lost: { version: 2, order: bV2.order, state: state('b v2') }, won: { version: 3, order: aV3.order, state: state('a v3') } }]);
    // On a, b's save never wins: nothing of a's is replaced.
    expect((await reporting([create(at(1)), v1, aV2, aV3], [bV2])).conflicts).toEqual([]);
  });

  it('a save built on the save it replaces, and one that stores the very same state, are no conflict', async () => {
    const bV2 = saved(at(6, 'b'), 2, 'b v2', at(2));
    expect((await reporting([create(at(1)), v1, bV2], [saved(at(7), 3, 'a v3', bV2.order)])).conflicts).toEqual([]);
    expect((await reporting([create(at(1)), v1, bV2], [saved(at(7), 2, 'b v2', at(2))])).conflicts).toEqual([]);
  });

  it('a restore replacing a save it was not built on is reported like a save', async () => {
    const bV2 = saved(at(6, 'b'), 2, 'b v2', at(2));
    const cp = checkpoint(at(3), []);
    const { conflicts } = await reporting([create(at(1)), v1, cp, bV2], [restore(at(7), 3, at(2))]);
    expect(conflicts.map((c) => [c.lost.order, c.won.version])).toEqual([[bV2.order, 3]]);
  });

  it('saves without a base (older ops) keep the older rule: reported only when they replace a save of the same version', async () => {
    const bV2 = saved(at(6, 'b'), 2, 'b v2');
    expect((await reporting([create(at(1)), saved(at(2), 1, 'v1'), bV2], [saved(at(3), 2, 'a v2'), saved(at(4), 3, 'a v3')])).conflicts).toEqual([]);
    expect((await reporting([create(at(1)), saved(at(2), 1, 'v1'), bV2], [saved(at(7), 2, 'a v2')])).conflicts).toHaveLength(1);
  });
});

describe('a delete names the work of the life it ends that its deleter had not seen', () => {
  const life = (o: Op): Op => ({ ...o, after: '' });
  const prelude = [life(create(at(1))), life(append(at(2), 'seen'))];
  const offline = [
    life(append(at(3, 'b'), 'm1')),
    life(append(at(4, 'b'), 'm2')),
    life(memorySet(at(5, 'b'), 'k', 1)),
    life(op('note.add', at(6, 'b'), { text: 'n', runId: null, scope: null, at: 1 })),
    life(saved(at(7, 'b'), 1, 'b v1', '')),
  ];

  it('on the device whose work it drops: the messages, memory keys, notes and the state', async () => {
    // Device a deleted at 10 having seen the create and 'seen' only (its clock, and nothing of b's).
    const deleted = life(op('session.delete', at(10), { seen: [at(2)] }));
    const { dropped } = await reporting([...prelude, ...offline], [deleted]);
    expect(dropped).toEqual([
      { userId: USER, sessionId: SESSION, messages: ['m1', 'm2'], memory: [{ scope: 'default', key: 'k' }], notes: [offline[3]?.id], state: true },
    ]);
  });

  it('nothing when the deleter had everything, or when its delete does not say what it had (older ops)', async () => {
    const seenAll = life(op('session.delete', at(10), { seen: [at(2), at(7, 'b')] }));
    expect((await reporting([...prelude, ...offline], [seenAll])).dropped).toEqual([]);
    expect((await reporting([...prelude, ...offline], [life(op('session.delete', at(10), {}))])).dropped).toEqual([]);
  });

  it('a delete names at most SEEN_MAX clocks, the most recent, so it stays small however many tabs wrote', async () => {
    const clocks = Array.from({ length: SEEN_MAX + 40 }, (_, i) => at(i, `c${String(i).padStart(3, '0')}`));
    const body = deleteBody({ seen: [...clocks].sort((a, b) => (a.slice(a.lastIndexOf('.')) < b.slice(b.lastIndexOf('.')) ? -1 : 1)) } as SessionRow);
    expect(body.seen).toHaveLength(SEEN_MAX);
    expect(new Set(body.seen)).toEqual(new Set(clocks.slice(40)));
    expect(() => parseOp({ id: 'd', kind: 'session.delete', userId: USER, sessionId: SESSION, order: at(999), after: '', body })).not.toThrow();
    expect(deleteBody({} as SessionRow)).toEqual({});
  });

  it('a message the deleter had, updated later by work it had not seen, is named', async () => {
    const update = life(op('message.update', at(8, 'b'), { id: 'seen', status: 'complete', message: { role: 'assistant', content: 'edited' }, order: at(2), createdAt: 1 }));
    const { dropped } = await reporting([...prelude, update], [life(op('session.delete', at(10), { seen: [at(2)] }))]);
    expect(dropped.map((d) => d.messages)).toEqual([['seen']]);
  });
});

/** A sync adapter that never syncs: with it, every local op is queued in the outbox, to be read back. */
const holdingSync: SyncAdapter = {
  start: () => ({
    status: () => ({ state: 'idle', pending: 0, lastSyncedAt: null, parked: [] }),
    subscribe: () => () => undefined,
    flush: async () => undefined,
    pause: () => undefined,
    resume: () => undefined,
    nudge: () => undefined,
    dropParked: async () => false,
    close: async () => undefined,
  }),
};

/** A device of user 'u' whose ops queue in its outbox (see holdingSync). */
async function device(): Promise<Tabula & { dbName: string }> {
  return freshTabula({ userId: 'u', sync: holdingSync });
}

/** The ops `tabula` queued for sync, in order. */
async function queued(tabula: { dbName: string }): Promise<Op[]> {
  const db = createDb(tabula.dbName);
  // Every row of user 'u', in seq order (the outbox is keyed by [userId+seq]).
  const rows = await userOutbox(db, 'u').toArray();
  db.close();
  return rows.flatMap((row) => (row.op ? [row.op] : []));
}

/** Applies `ops` to the database of `tabula` as a sync pull would. */
async function pull(tabula: { dbName: string }, ops: Op[]): Promise<void> {
  const db = createDb(tabula.dbName);
  await db.transaction('rw', sessionTables(db), async () => applyOps(db, ops));
  db.close();
}

describe('one export imported into one id on two devices', () => {
  it('is stored once, in one order, on both, whichever device hears of the other first', async () => {
    const source = await freshTabula({ userId: 'u' });
    const session = await source.session('source');
    await session.append([
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'b' },
    ]);
    await session.note('twice');
    await session.note('twice');
    await session.journal.apply([1, 2]);
    await session.journal.markCommitted();
    await session.memory().set('k', 'v');
    await session.save({ tasks: 'imported' });
    const data = JSON.parse(JSON.stringify(await session.export())) as SessionExport;
    await source.close();

    const [one, two] = [await device(), await device()];
    // Each device imports, then appends to its copy, before it hears of the other's.
    await (await two.importSession({ ...data, sessionId: 'copy' })).append({ role: 'user', content: 'two' });
    await (await one.importSession({ ...data, sessionId: 'copy' })).append({ role: 'user', content: 'one' });
    const [fromOne, fromTwo] = [await queued(one), await queued(two)];
    await pull(one, fromTwo);
    await pull(two, fromOne);
    const shown = async (tabula: Tabula) => {
      const copy = await tabula.session('copy');
      return {
        messages: (await copy.messages()).map((m) => [m.id, m.order, m.content]),
        notes: (await copy.notes()).map((n) => [n.id, n.text]),
        journal: [await copy.journal.view(), await copy.journal.diff()],
        state: await copy.state(),
        memory: await copy.memory().get('k'),
        count: await copy.messageCount(),
      };
    };
    const onOne = await shown(one);
    // The copies first, at their source's order keys; each device's own append after them (in clock order).
    expect(onOne.messages.map(([, , content]) => content).slice(0, 2)).toEqual(['a', 'b']);
    expect(onOne.messages.map(([, , content]) => content).slice(2).sort()).toEqual(['one', 'two']);
    expect(onOne.messages.slice(0, 2).map(([id, order]) => [id, order])).toEqual(data.messages.map((m) => [m.id, m.order]));
    expect(onOne.notes.map(([, text]) => text)).toEqual(['twice', 'twice']);
    expect(onOne.journal).toEqual([[1, 2], []]);
    expect(onOne).toMatchObject({ memory: 'v', count: 4, state: { version: 1, tasks: 'imported' } });
    expect(await shown(two)).toEqual(onOne);
    await one.close();
    await two.close();
  });
});

describe('an import into an id deleted after the history it copies was written', () => {
  it('writes ops every replica accepts, as does the queueing of it for sync later: its rows sort after the delete', async () => {
    const name = uniqueName('import-after-delete');
    const local = await freshTabula({ name, userId: 'u' });
    const source = await local.session('source');
    await source.append([
      { role: 'user', content: 'older than the delete' },
      { role: 'assistant', content: 'so is this' },
    ]);
    await source.note('old note');
    await source.journal.apply([1]);
    await source.journal.markCommitted();
    const data = JSON.parse(JSON.stringify(await source.export())) as SessionExport;
    await local.session('copy');
    await local.deleteSession('copy');
    const copy = await local.importSession({ ...data, sessionId: 'copy' });
    await copy.append({ role: 'user', content: 'after the import' });
    expect((await copy.messages()).map((m) => m.content)).toEqual(['older than the delete', 'so is this', 'after the import']);
    await local.close();
    // Sync turned on later queues what the profile holds, by its stored order keys.
    const synced = await freshTabula({ name, userId: 'u', sync: holdingSync });
    const ops = await queued(synced);
    expect(ops.some((o) => o.sessionId === 'copy' && o.kind === 'note.add')).toBe(true);
    for (const o of ops) expect(() => parseOp(JSON.parse(JSON.stringify(o)))).not.toThrow();
    await synced.close();
    // And an import made with sync on writes valid ops too.
    const device2 = await device();
    await device2.session('copy');
    await device2.deleteSession('copy');
    await device2.importSession({ ...data, sessionId: 'copy' });
    for (const o of await queued(device2)) expect(() => parseOp(JSON.parse(JSON.stringify(o)))).not.toThrow();
    await device2.close();
  });
});

describe('a handle from before its session was deleted and created again (two tabs)', () => {
  it('refuses every write with session/not-found, and nothing of it lands in the new life', async () => {
    const name = uniqueName('old-handle');
    const [first, second] = [await openTabula({ name }), await openTabula({ name })];
    const old = await first.session('s');
    await old.append({ role: 'user', content: 'first life' });
    const checkpointId = (await old.checkpoint()).id;
    await second.deleteSession('s');
    const renewed = await second.session('s');
    await renewed.append({ role: 'user', content: 'second life' });
    const writes: [string, () => Promise<unknown>][] = [
      ['append', () => old.append({ role: 'user', content: 'into the new life?' })],
      ['save', () => old.save({ tasks: 'old' })],
      ['setPrefix', async () => old.setPrefix(await renewed.prefix())],
      ['note', () => old.note('old')],
      ['memory.set', () => old.memory().set('k', 'old')],
      ['memory.transact', () => old.memory().transact((tx) => tx.set('k', 'old'))],
      ['journal.record', () => old.journal.record('old')],
      ['clearContext', () => old.clearContext()],
      ['checkpoint', () => old.checkpoint()],
      ['restore', () => old.restore(checkpointId)],
      ['run', () => old.run(async () => 1)],
      ['stream', () => old.stream({ role: 'assistant' })],
    ];
    for (const [what, write] of writes) await expect(write(), what).rejects.toMatchObject({ code: 'session/not-found' });
    const fresh = await first.session('s');
    expect((await fresh.messages()).map((m) => m.content)).toEqual(['second life']);
    expect(await fresh.notes()).toEqual([]);
    expect(await fresh.memory().keys()).toEqual([]);
    expect(await fresh.state()).toMatchObject({ version: 0, tasks: null });
    // The handle of the new life writes as before.
    await fresh.append({ role: 'user', content: 'through a new handle' });
    expect(await renewed.messageCount()).toBe(2);
    await first.close();
    await second.close();
  });
});
