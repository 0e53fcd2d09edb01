/**
 * The guards of the one write path against ops that arrive late or out of
 * order, as sync delivers them: each device's own ops in its order, other
 * devices' ops interleaved anywhere. Each scenario applies the same ops to
 * two replicas, once in order-key order and once in a late order, and
 * checks that both show the same session through the public API, and the
 * value the guard exists for. Session lives have their own file, session-lives.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Op } from '../../../../src/core/index.js';
import { formatHlc, subOrder } from '../../../../src/core/hlc.js';
import { applyOps } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../../src/store/db/schema.js';
import { uniqueName } from '../helpers.js';
import {
  append,
  at,
  BASE_MS,
  closeReplicas,
  converge,
  create,
  memoryDelete,
  memorySet,
  op,
  openReplica,
  prefix,
  replica,
  save,
  SESSION,
  snapshotOf,
  update,
  view,
} from '../replicas.js';

afterEach(closeReplicas);

describe('applyOps: late and out-of-order ops (guards)', () => {
  it('a replayed create from before a delete does not bring the session back (tombstone)', async () => {
    const c = create(at(1));
    const { expected, late } = await converge([[c, append(at(2), 'm1'), op('session.delete', at(3), {})], [c]]);
    expect(expected).toBeNull();
    expect(late.applied[1]).toEqual([]);
  });

  it('a create ordered exactly at the tombstone stays refused', async () => {
    const { applied } = await replica([create(at(1)), op('session.delete', at(3), {})], [create(at(3))]);
    expect(applied[1]).toEqual([]);
  });

  it('a create after the delete starts a new life, and a replayed delete of the old life changes nothing', async () => {
    const oldDelete = op('session.delete', at(3), {});
    const { expected, late } = await converge([[create(at(1)), append(at(2), 'old'), oldDelete, create(at(4)), append(at(5), 'new')], [oldDelete]]);
    expect(expected?.messages).toEqual(['new:complete:new']);
    expect(late.applied[1]).toEqual([]);
  });

  it('two creates of one session: its life starts at the earliest, whichever arrives first', async () => {
    // Device b created the session at 5, device a at 1 and appended at 3; b hears of a's ops late.
    const { expected, late } = await converge([[create(at(5, 'b'))], [create(at(1)), append(at(3), 'early')]]);
    expect(expected?.messages).toEqual(['early:complete:early']);
    expect(late.applied[1]).toHaveLength(2);
    // A later create changes nothing.
    const again = await replica([create(at(1)), create(at(5, 'b'))]);
    expect(again.applied[0]).toHaveLength(1);
  });

  it('appends of two sessions, or of two users, in one batch each land in their own session, counted there', async () => {
    // applyOps applies consecutive appends of one session as one batch: the batch must end at another session's op.
    const other = (o: Op): Op => ({ ...o, sessionId: 'other' });
    const otherUser = (o: Op): Op => ({ ...o, userId: 'v' });
    const { name } = await replica([
      create(at(1)),
      other(create(at(2))),
      otherUser(create(at(3))),
      append(at(4), 'a'),
      other(append(at(5), 'b')),
      otherUser(append(at(6), 'c')),
      append(at(7), 'd'),
    ]);
    expect((await view(name))?.messages).toEqual(['a:complete:a', 'd:complete:d']);
    expect((await view(name))?.info.messageCount).toBe(2);
    expect((await view(name, 'other'))?.messages).toEqual(['b:complete:b']);
    expect((await view(name, 'other'))?.info.messageCount).toBe(1);
    const db = createDb(name);
    const theirs = await db.sessions.get(['v', SESSION]);
    db.close();
    expect(theirs?.messageCount).toBe(1);
  });

  it('an update that arrives before its append stores the message, unless a clear ordered after the message dropped it', async () => {
    // A final update carries the order and createdAt its append had, so it can stand in for a lost or late append.
    const first = (order: string, id: string, fields: { order?: string; createdAt?: number }) =>
      op('message.update', order, { id, status: 'complete', message: { role: 'assistant', content: id }, ...fields });
    const { name, applied } = await replica(
      [create(at(1)), op('session.clear', at(4), {})],
      [first(at(6), 'cleared', { order: at(2), createdAt: 1 }), first(at(7), 'kept', { order: at(5), createdAt: 1 })],
      // Older data: an update without its message's place cannot stand in for the append.
      [first(at(8), 'no-order', { createdAt: 1 }), first(at(9), 'no-createdAt', { order: at(5) }), first(at(10), 'neither', {})],
    );
    expect(applied[1]?.map((o) => o.order)).toEqual([at(7)]);
    expect(applied[2]).toEqual([]);
    expect((await view(name))?.messages).toEqual(['kept:complete:kept']);
    expect((await view(name))?.info.messageCount).toBe(1);
  });

  it('an op for a session that does not exist is not applied', async () => {
    const { applied } = await replica([append(at(2), 'orphan'), prefix(at(3), 'p')]);
    expect(applied[0]).toEqual([]);
    expect(await view((await replica([])).name)).toBeNull();
  });

  it('a clear keeps messages ordered after it, and drops a late append ordered before it', async () => {
    const { expected, late } = await converge([
      [create(at(1)), append(at(2), 'before'), append(at(6, 'b'), 'concurrent')],
      [op('session.clear', at(4), {})],
      [append(at(3), 'late')],
    ]);
    expect(expected?.messages).toEqual(['concurrent:complete:concurrent']);
    expect(expected?.messageCount).toBe(1);
    expect(expected?.info.messageCount).toBe(1);
    expect(late.applied[2]).toEqual([]);
  });

  it('an older clear arriving after a newer one does not let a message between them back in', async () => {
    const { expected, late } = await converge([
      [create(at(1)), op('session.clear', at(6), {})],
      [op('session.clear', at(3), {})],
      [append(at(4), 'between')],
    ]);
    expect(expected?.messages).toEqual([]);
    expect(late.applied[2]).toEqual([]);
  });

  it('a clear arriving after a later save keeps that save\'s summary', async () => {
    const { expected } = await converge([[create(at(1)), save(at(5, 'b'), 1, { summary: 'kept' })], [op('session.clear', at(3), {})]]);
    expect(expected?.state.summary).toBe('kept');
    // and a clear after the save drops it
    const after = await view((await replica([create(at(1)), save(at(3), 1, { summary: 'gone' }), op('session.clear', at(5), {})])).name);
    expect(after?.state.summary).toBeNull();
    expect(after?.state.version).toBe(1);
  });

  it('a restore drops a late append ordered before it and keeps the restored messages against a late clear', async () => {
    const checkpoint = op('checkpoint.create', at(3), { id: 'cp1', label: null, at: 1, snapshot: snapshotOf([{ id: 'm1', order: at(2) }]) });
    const restore = op('checkpoint.restore', at(6), { id: 'cp1', version: 1 });
    const { expected, late } = await converge([
      [create(at(1)), append(at(2), 'm1'), checkpoint, append(at(4), 'm2'), restore],
      [append(at(5, 'b'), 'late')],
      [op('session.clear', at(5, 'c'), {})],
    ]);
    expect(expected?.messages).toEqual(['m1:complete:m1']);
    expect(expected?.prefix).toBe('from checkpoint');
    expect(expected?.state.summary).toBe('cp');
    expect(expected?.state.version).toBe(1);
    expect(late.applied[1]).toEqual([]);
  });

  it('restore() of another session\'s checkpoint changes nothing', async () => {
    const foreign = op('checkpoint.create', at(3), { id: 'other-cp', label: null, at: 1, snapshot: snapshotOf([{ id: 'x', order: at(2) }]) }, 'other');
    const { applied, name } = await replica(
      [create(at(1)), create(at(1), 'other'), append(at(2), 'mine'), foreign],
      [op('checkpoint.restore', at(5), { id: 'other-cp', version: 1 })],
      [op('checkpoint.restore', at(6), { id: 'missing', version: 1 })],
    );
    expect(applied[1]).toEqual([]);
    expect(applied[2]).toEqual([]);
    const shown = await view(name);
    expect(shown?.messages).toEqual(['mine:complete:mine']);
    expect(shown?.state.version).toBe(0);
  });

  it('a save of an older version changes nothing; of the same version, the greater order wins', async () => {
    const { applied, name } = await replica(
      [create(at(1)), save(at(4), 1, { summary: 'v1' }), save(at(5), 2, { summary: 'v2' })],
      [save(at(7), 1, { summary: 'stale' }), save(at(3, 'b'), 2, { summary: 'same version, earlier' })],
    );
    expect(applied[1]).toEqual([]);
    expect((await view(name))?.state).toMatchObject({ summary: 'v2', version: 2 });
    const later = await replica([create(at(1)), save(at(5), 2, { summary: 'v2' })], [save(at(8, 'b'), 2, { summary: 'same version, later' })]);
    expect(later.applied[1]).toHaveLength(1);
    expect((await view(later.name))?.state).toMatchObject({ summary: 'same version, later', version: 2 });
  });

  it('a late stream update never reopens a final message (complete, interrupted)', async () => {
    for (const final of ['complete', 'interrupted'] as const) {
      const partial = update(at(3), 'm1', 'partial', 'streaming');
      const { expected, late } = await converge([[create(at(1)), append(at(2), 'm1', '', 'streaming'), update(at(4), 'm1', 'final', final)], [partial]]);
      expect(expected?.messages).toEqual([`m1:${final}:final`]);
      expect(late.applied[1]).toEqual([]);
    }
    // While it streams, updates do apply.
    const streaming = await replica([create(at(1)), append(at(2), 'm1', '', 'streaming'), update(at(3), 'm1', 'grown', 'streaming')]);
    expect(streaming.applied[0]).toHaveLength(3);
    // (Opening the replica marks the orphaned stream interrupted; its text is the update's.)
    expect((await view(streaming.name))?.messages).toEqual(['m1:interrupted:grown']);
    // An update of a message that is not there changes nothing.
    expect((await replica([create(at(1)), update(at(3), 'nope', 'x', 'complete')])).applied[0]).toHaveLength(1);
  });

  it('prefix: the greatest order wins, whichever arrives last', async () => {
    const { expected, late } = await converge([[create(at(1)), prefix(at(5, 'b'), 'newer')], [prefix(at(3), 'older')]]);
    expect(expected?.prefix).toBe('newer');
    expect(late.applied[1]).toEqual([]);
    const replayed = prefix(at(6), 'same');
    expect((await replica([create(at(1)), replayed], [replayed])).applied[1]).toEqual([]);
  });

  it('memory: the greatest order wins for set and delete, whichever arrives last', async () => {
    const { expected, late } = await converge([
      [create(at(1)), memorySet(at(5, 'b'), 'x', 2), memoryDelete(at(6, 'b'), 'y')],
      [memorySet(at(3), 'x', 1), memorySet(at(4), 'y', 1), memorySet(at(7), 'z', 3), memoryDelete(at(2), 'z')],
    ]);
    expect(expected?.memory).toEqual({ x: 2, z: 3 });
    expect(late.applied[1]!.map((o) => o.order)).toEqual([at(7)]);
    const replayed = memorySet(at(8), 'x', 9);
    expect((await replica([create(at(1)), replayed], [replayed])).applied[1]).toEqual([]);
  });

  it('journal: a commit covers the entries up to the one it names, whatever arrives first, and never moves back', async () => {
    const entries = (n: number) => Array.from({ length: n }, (_, i) => i);
    const commit = (order: string, through: string, watermark: number) => op('journal.commit', order, { watermark, through });
    const { name, applied } = await replica(
      [create(at(1)), op('journal.append', at(2), { entries: entries(2) })],
      [commit(at(3), subOrder(at(2), 1), 2)],
      // Entries made after the commit, on another device, stay pending.
      [op('journal.append', at(4, 'b'), { entries: [10, 11] })],
      // A stale commit changes nothing.
      [commit(at(5), subOrder(at(2), 0), 1)],
    );
    expect(applied[1]).toHaveLength(1);
    expect(applied[3]).toEqual([]);
    const shown = await view(name);
    expect(shown?.journal).toEqual([0, 1, 10, 11]);
    expect(shown?.pending).toEqual([10, 11]);
    // A commit that arrives before its entries commits them when they come, and not the later ones.
    const { expected } = await converge([
      [create(at(1))],
      [commit(at(3), subOrder(at(2), 1), 2), op('journal.append', at(4, 'b'), { entries: [10] })],
      [op('journal.append', at(2), { entries: entries(2) })],
    ]);
    expect(expected?.journal).toEqual([0, 1, 10]);
    expect(expected?.pending).toEqual([10]);
    const replayed = op('journal.append', at(6), { entries: [1] });
    expect((await replica([create(at(1)), replayed], [replayed])).applied[1]).toEqual([]);
  });

  it('journal: markCommitted() names the last entry it covers, so a later entry from another device stays pending', async () => {
    const name = uniqueName('journal');
    const tab = await openReplica(name);
    const session = await tab.session(SESSION);
    await session.journal.apply([1, 2]);
    await session.journal.markCommitted();
    await session.journal.apply([3]);
    expect(await session.journal.diff()).toEqual([3]);
    // An empty journal has nothing to commit.
    const empty = await tab.session('empty');
    await empty.journal.markCommitted();
    expect(await empty.journal.diff()).toEqual([]);
  });

  it('notes and checkpoints are added once', async () => {
    const note = op('note.add', at(2), { text: 'n', runId: null, scope: null, at: 1 });
    const checkpoint = op('checkpoint.create', at(3), { id: 'cp1', label: 'l', at: 1, snapshot: snapshotOf([]) });
    const { name, applied } = await replica([create(at(1)), note, checkpoint], [note, checkpoint]);
    expect(applied[1]).toEqual([]);
    const shown = await view(name);
    expect(shown?.notes).toEqual(['n']);
    expect(shown?.checkpoints).toEqual(['cp1']);
  });

  it('token totals: a late message before the counted ones is counted, and a finished stream is recounted', async () => {
    // One replica counts after every step (and caches a running total); each count must equal the count
    // of a replica that never cached one.
    const name = uniqueName('tokens');
    const db = createDb(name);
    const soFar: Op[] = [];
    const apply = async (ops: Op[]) => {
      soFar.push(...ops);
      await db.transaction('rw', sessionTables(db), () => applyOps(db, ops));
    };
    await apply([create(at(1)), append(at(5), 'm5', 'five five five five')]);
    const session = await (await openReplica(name)).session(SESSION);
    // Opened after the Tabula, so that its recovery does not mark the stream interrupted.
    await apply([append(at(6), 'm6', 'x', 'streaming')]);
    const expectFreshCount = async () => {
      const fresh = await view((await replica([...soFar])).name);
      expect(await session.tokens()).toBe(fresh?.tokens);
    };
    await expectFreshCount(); // caches a running total up to m6
    await apply([append(at(3, 'b'), 'm3', 'a late message from another device, ordered before the total')]);
    await expectFreshCount();
    await apply([update(at(7), 'm6', 'the stream finished with a much longer text than it started with', 'complete')]);
    await expectFreshCount();
    await apply([op('session.clear', at(8), {}), append(at(9), 'm9', 'after the clear')]);
    await expectFreshCount();
    db.close();
  });

  it('one batch applies each op to its own session, and lists a delete as applied', async () => {
    const other = (o: Op): Op => ({ ...o, sessionId: 'other' });
    const { applied, name } = await replica([create(at(1)), other(create(at(1))), append(at(2), 'mine'), other(append(at(3), 'theirs'))], [op('session.delete', at(4), {})]);
    expect(applied[0]).toHaveLength(4);
    expect(applied[1]!.map((o) => o.kind)).toEqual(['session.delete']);
    expect(await view(name)).toBeNull();
    expect((await view(name, 'other'))?.messages).toEqual(['theirs:complete:theirs']);
  });

  it('an earlier create that arrives alone still moves the start of the session\'s life', async () => {
    const { applied, name } = await replica([create(at(5, 'b'))], [create(at(1))], [append(at(3), 'early')]);
    expect(applied[1]).toHaveLength(1);
    expect(applied[2]).toHaveLength(1);
    expect((await view(name))?.messages).toEqual(['early:complete:early']);
  });

  it('a replayed create changes nothing', async () => {
    const c = create(at(1));
    const { applied } = await replica([c, append(at(2), 'm1')], [c]);
    expect(applied[1]).toEqual([]);
  });

  it('a delete removes everything of the old life: messages, journal, notes, memory, checkpoints', async () => {
    const oldLife = [
      append(at(2), 'old'),
      op('journal.append', at(3), { entries: ['old'] }),
      op('note.add', at(4), { text: 'old', runId: null, scope: null, at: 1 }),
      memorySet(at(5), 'k', 1),
      op('checkpoint.create', at(6), { id: 'old-cp', label: null, at: 1, snapshot: snapshotOf([]) }),
      prefix(at(7), 'old prefix'),
      save(at(8), 1, { summary: 'old summary' }),
    ];
    const { name } = await replica([create(at(1)), ...oldLife, op('session.delete', at(9), {}), create(at(10))]);
    const shown = await view(name);
    expect(shown).toMatchObject({ messages: [], journal: [], notes: [], memory: {}, checkpoints: [], prefix: '', messageCount: 0 });
    expect(shown?.state).toMatchObject({ summary: null, version: 0 });
  });

  it('a save without a summary does not shield the summary from a late clear ordered after it', async () => {
    const { expected } = await converge([
      [create(at(1)), save(at(2), 1, { summary: 'old' }), save(at(5), 2, { tasks: ['t'] })],
      [op('session.clear', at(3, 'b'), {})],
    ]);
    expect(expected?.state).toMatchObject({ summary: null, tasks: ['t'], version: 2 });
  });

  it('restore() of a checkpoint that belongs to another user\'s session of the same id changes nothing', async () => {
    const foreign: Op = { ...op('checkpoint.create', at(3), { id: 'their-cp', label: null, at: 1, snapshot: snapshotOf([{ id: 'x', order: at(2) }]) }), userId: 'v' };
    const { applied, name } = await replica(
      [create(at(1)), { ...create(at(1)), userId: 'v' }, append(at(2), 'mine'), foreign],
      [op('checkpoint.restore', at(5), { id: 'their-cp', version: 1 })],
    );
    expect(applied[1]).toEqual([]);
    expect((await view(name))?.messages).toEqual(['mine:complete:mine']);
  });

  it('a late op does not move the session back: the next local write still follows everything', async () => {
    const name = uniqueName('last-order');
    const tabula = await openReplica(name);
    const session = await tabula.session(SESSION);
    const ahead = formatHlc({ wallMs: Date.now() + 3_600_000, counter: 0, clientId: 'ahead' });
    const db = createDb(name);
    const userId = session.userId;
    const remote = (order: string, id: string): Op => ({ id: `op-${id}`, kind: 'message.append', userId, sessionId: SESSION, order, body: { id, createdAt: 1, status: 'complete', message: { role: 'user', content: id } } });
    await db.transaction('rw', sessionTables(db), async () => applyOps(db, [remote(ahead, 'ahead')]));
    // A late op, ordered after the session's creation but before `ahead`, arrives afterwards.
    const late = formatHlc({ wallMs: Date.now() + 60_000, counter: 0, clientId: 'behind' });
    await db.transaction('rw', sessionTables(db), async () => applyOps(db, [remote(late, 'late')]));
    db.close();
    await session.append({ role: 'user', content: 'local' });
    expect((await session.messages()).map((m) => m.content)).toEqual(['late', 'ahead', 'local']);
  });

  it('the session row follows the latest op: updatedAt never moves back', async () => {
    const { name } = await replica([create(at(1)), append(at(9), 'm9')], [append(at(4, 'b'), 'm4')]);
    const shown = await view(name);
    expect(shown?.info.updatedAt).toBe(BASE_MS + 9);
    expect(shown?.messages).toEqual(['m4:complete:m4', 'm9:complete:m9']);
  });
});

describe('applyOps: restores, deletes and same-version saves converge', () => {
  // A restore on device a, concurrent with an append on device b ordered after it: a applies the
  // restore then the append and keeps the message; b applied its append first, and the restore then
  // deletes every message of the session, the later append included. The replicas never converge,
  // and b loses a message its user saw stored. (The restore should delete only messages ordered
  // before it, as session.clear does.)
  it('a restore does not delete a message ordered after it that arrived first', async () => {
    const checkpoint = op('checkpoint.create', at(3), { id: 'cp1', label: null, at: 1, snapshot: snapshotOf([{ id: 'm1', order: at(2) }]) });
    const { expected } = await converge([
      [create(at(1)), append(at(2), 'm1'), checkpoint, append(at(7, 'b'), 'after-restore')],
      [op('checkpoint.restore', at(6), { id: 'cp1', version: 1 })],
    ]);
    expect(expected?.messages).toEqual(['m1:complete:m1', 'after-restore:complete:after-restore']);
  });

  // The same class for the prefix: a restore sets it unconditionally, so a prefix.set ordered after
  // the restore but applied before it is overwritten on one replica and kept on the other.
  it('a restore does not overwrite a prefix set after it that arrived first', async () => {
    const checkpoint = op('checkpoint.create', at(3), { id: 'cp1', label: null, at: 1, snapshot: snapshotOf([]) });
    const { expected } = await converge([
      [create(at(1)), checkpoint, prefix(at(7, 'b'), 'set after the restore')],
      [op('checkpoint.restore', at(6), { id: 'cp1', version: 1 })],
    ]);
    expect(expected?.prefix).toBe('set after the restore');
  });

  // Two devices delete the session concurrently. The tombstone keeps the order of whichever delete
  // reached the replica first, so a create ordered between the two deletes (a third device, offline
  // until now) brings the session back on a replica that saw the earlier delete first, and not on one
  // that saw the later first. A delete of a session already gone should still raise the tombstone.
  it('two concurrent deletes leave the same tombstone whatever their arrival order', async () => {
    // In order-key order, b's delete (6) ends the life c's create (4) began. Here the earlier delete
    // arrives first, b's finds no session and leaves the tombstone at 3, and c's create then passes.
    const { expected } = await converge([
      [create(at(1)), op('session.delete', at(3), {})],
      [op('session.delete', at(6, 'b'), {})],
      [create(at(4, 'c')), append(at(5, 'c'), 'from c')],
    ]);
    expect(expected).toBeNull();
  });

  // docs/architecture.md, Convergence: the greatest (version, order) wins on every replica. Two devices that
  // both save version 1 keep whichever arrived first, so the replicas disagree for good.
  it('two saves of the same version: the one with the greater order wins everywhere', async () => {
    const { expected } = await converge([[create(at(1)), save(at(5, 'b'), 1, { summary: 'from b' })], [save(at(3), 1, { summary: 'from a' })]]);
    expect(expected?.state.summary).toBe('from b');
  });
});

describe('applyOps: a stream update, a clear and a restore (found by the sync fuzz)', () => {
  // Device a streams m1 and takes a checkpoint while it streams; device b clears the session and
  // restores that checkpoint, so m1 is back as a copy (streaming, the checkpoint's text); then a
  // finishes the stream: its final update is ordered after the restore and, in order-key order,
  // completes the copy. A replica that applied the final update before the clear and the restore
  // (device a itself) applied it to the original, which the clear then dropped; the restore only
  // carries over updates of originals still present, so the copy stays streaming (then interrupted)
  // there and complete everywhere else, for good. So an update outlives the row it was applied to:
  // each message keeps the latest update of each status in a register (meta), and a restore folds
  // into each copy those ordered after it.
  const streamingSnapshot = {
    prefix: { systemPrompt: '', grounding: [], schemaBlock: null },
    state: { summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} },
    messages: [{ id: 'm1', order: at(2), createdAt: 1, status: 'streaming' as const, message: { role: 'assistant' as const, content: 'part' } }],
  };
  const ops = () => {
    const final = op('message.update', at(7), { id: 'm1', status: 'complete', message: { role: 'assistant', content: 'part and the rest' }, order: at(2), createdAt: 1 });
    return {
      before: [
        create(at(1)),
        append(at(2), 'm1', '', 'streaming'),
        op('checkpoint.create', at(3), { id: 'cp1', label: null, at: 1, snapshot: streamingSnapshot }),
      ],
      clear: op('session.clear', at(4, 'b'), {}),
      restore: op('checkpoint.restore', at(5, 'b'), { id: 'cp1', version: 1 }),
      final,
    };
  };

  it('a final update applied before the clear and the restore still completes the restored copy', async () => {
    const { before, clear, restore, final } = ops();
    const { expected } = await converge([[...before, final], [clear, restore]]);
    expect(expected?.messages).toEqual(['m1:complete:part and the rest']);
  });

  it('a final update that arrives between the clear and the restore still completes the restored copy', async () => {
    const { before, clear, restore, final } = ops();
    const { expected } = await converge([[...before, clear], [final], [restore]]);
    expect(expected?.messages).toEqual(['m1:complete:part and the rest']);
  });

  it('a final update that arrives after the restore completes the copy (the order-key order)', async () => {
    const { before, clear, restore, final } = ops();
    const { expected } = await converge([[...before, clear, restore], [final]]);
    expect(expected?.messages).toEqual(['m1:complete:part and the rest']);
  });
});
