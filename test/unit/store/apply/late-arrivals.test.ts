/**
 * More guards of the one write path (the first ones are in out-of-order.test.ts): ops replayed, late,
 * or ordered before what a replica already holds, for each kind of op. Each scenario either applies
 * the same ops to two replicas, in order-key order and late (`converge`), and checks the value the
 * guard exists for, or checks what applyOps lists as applied: the ops that changed something, which
 * the sync client and the change feed act on, so a replay must not be listed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Op } from '../../../../src/core/index.js';
import { subOrder } from '../../../../src/core/hlc.js';
import { applyOps, type SaveConflict } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../../src/store/db/schema.js';
import { messageUpdatesKey } from '../../../../src/store/db/keys.js';
import { uniqueName } from '../helpers.js';
import { append, at, BASE_MS, closeReplicas, converge, create, memorySet, op, prefix, replica, save, SESSION, snapshotOf, update, USER, view } from '../replicas.js';

afterEach(closeReplicas);

/** `o` as written in the life that began after the delete at `after` ('' for the first life). */
const inLife = (after: string, o: Op): Op => ({ ...o, after });
const createdAt = (order: string, createdAtMs: number) => op('session.create', order, { createdAt: createdAtMs, forkOf: null });
const del = (order: string) => op('session.delete', order, {});
const clear = (order: string) => op('session.clear', order, {});
const remove = (order: string, id: string) => op('message.remove', order, { id });
const journal = (order: string, entries: string[]) => op('journal.append', order, { entries });
/** A journal commit; without `through` it is one of the older data, which counts entries. */
const commit = (order: string, watermark: number, through?: string) => op('journal.commit', order, through === undefined ? { watermark } : { watermark, through });
const restore = (order: string, version = 1) => op('checkpoint.restore', order, { id: 'cp1', version });
/** A checkpoint 'cp1' of the messages (complete unless `streaming`). */
function checkpoint(order: string, messages: { id: string; order: string }[], streaming = false): Op {
  const snapshot = snapshotOf(messages);
  const frozen = streaming ? { ...snapshot, messages: snapshot.messages.map((m) => ({ ...m, status: 'streaming' as const })) } : snapshot;
  return op('checkpoint.create', order, { id: 'cp1', label: null, at: 1, snapshot: frozen });
}

describe('applyOps: creates and deletes', () => {
  it('a delete that names its life and ends it is listed as applied', async () => {
    const ending = inLife('', del(at(3)));
    const { name, applied } = await replica([inLife('', create(at(1))), inLife('', append(at(2), 'm1'))], [ending]);
    expect(applied[1]).toEqual([ending]);
    expect(await view(name)).toBeNull();
  });

  it('an op of this life ordered before the create this replica has still lands: another device created the same life earlier', async () => {
    // b created the session at 5 without having heard of a's create at 1; c wrote at 2 after a's create, and reaches this replica before a does.
    const { expected } = await converge([[inLife('', create(at(5, 'b')))], [inLife('', memorySet(at(2, 'c'), 'k', 1))], [inLife('', create(at(1)))]]);
    expect(expected?.memory).toEqual({ k: 1 });
  });

  it('a later create carrying a later createdAt moves updatedAt, one with an earlier createdAt does not move it back', async () => {
    const first = createdAt(at(1), 1);
    const later = createdAt(at(5, 'b'), BASE_MS + 100);
    for (const late of [[[first], [later]], [[later], [first]]]) expect((await converge(late)).expected?.info.updatedAt).toBe(BASE_MS + 100);
    const { expected } = await converge([[first], [createdAt(at(5, 'b'), 1)]]);
    expect(expected?.info.updatedAt).toBe(BASE_MS + 5);
  });

  it('an earlier create carrying the greatest createdAt sets updatedAt, whichever create arrives first (bug: only when it arrived first)', async () => {
    // createdAt comes from the device that made the session (an import keeps the exported one), so it may be past every order's wall time.
    const early = createdAt(at(1), BASE_MS + 100);
    const later = createdAt(at(5, 'b'), 1);
    for (const late of [[[early], [later]], [[later], [early]]]) expect((await converge(late)).expected?.info.updatedAt).toBe(BASE_MS + 100);
  });

  it('a later create whose createdAt is past everything else moves updatedAt even when later ops arrived before it', async () => {
    const { expected } = await converge([[create(at(1)), append(at(6), 'm1')], [createdAt(at(5, 'b'), BASE_MS + 100)]]);
    expect(expected?.info.updatedAt).toBe(BASE_MS + 100);
  });

  it('a delete of a session already gone moves its tombstone forward only', async () => {
    // b deleted at 3 and created again at 4; a deleted at 5, and this replica hears of a first.
    const { expected } = await converge([[create(at(1)), del(at(5))], [del(at(3, 'b')), create(at(4, 'b'))]]);
    expect(expected).toBeNull();
  });

  it('an op for a session this replica does not have leaves no tombstone: the create that arrives after it still makes the session', async () => {
    const { name, applied } = await replica([memorySet(at(5), 'k', 1)], [create(at(4))]);
    expect(applied).toEqual([[], [expect.objectContaining({ kind: 'session.create' })]]);
    expect((await view(name))?.messageCount).toBe(0);
  });

  it('appends that name a life beside a row that names none are listed as applied once', async () => {
    // A row made by a create from before lives were named: such appends are applied one by one.
    const named = inLife('', append(at(2), 'm1'));
    const { name, applied } = await replica([create(at(1))], [named], [named]);
    expect(applied[1]).toEqual([named]);
    expect(applied[2]).toEqual([]);
    expect((await view(name))?.messages).toEqual(['m1:complete:m1']);
  });
});

describe('applyOps: clears and message updates', () => {
  it('a replayed clear, or one ordered before the last, is not listed as applied', async () => {
    const last = clear(at(4));
    const { name, applied } = await replica([create(at(1)), append(at(2), 'm1'), last, append(at(5), 'm2')], [last], [clear(at(3, 'b'))]);
    expect(applied[1]).toEqual([]);
    expect(applied[2]).toEqual([]);
    expect((await view(name))?.messages).toEqual(['m2:complete:m2']);
  });

  it('an update ordered before a restored copy leaves the copy as restored, even with a higher status', async () => {
    const ops = [create(at(1)), append(at(2), 'm1', 'm1', 'streaming'), checkpoint(at(3), [{ id: 'm1', order: at(2) }], true), restore(at(5))];
    const { expected, late } = await converge([ops, [update(at(4, 'b'), 'm1', 'done', 'complete')]]);
    expect(late.applied[1]).toEqual([]);
    // Still the restored streaming copy, which opening the replica finds with no stream alive (crash recovery): interrupted, not the update's complete.
    expect(expected?.messages).toEqual(['m1:interrupted:m1']);
  });

  it('of two updates with the same status the later one wins, whichever arrives last; a replay is not listed', async () => {
    const second = update(at(4), 'm1', 'second', 'complete');
    const { expected } = await converge([[create(at(1)), append(at(2), 'm1', 'm1', 'streaming')], [second], [update(at(3, 'b'), 'm1', 'first', 'complete')]]);
    expect(expected?.messages).toEqual(['m1:complete:second']);
    const { applied } = await replica([create(at(1)), append(at(2), 'm1', 'm1', 'streaming'), second], [second]);
    expect(applied[1]).toEqual([]);
  });

  it('a final update beats a streaming update ordered after it', async () => {
    const { expected } = await converge([
      [create(at(1)), append(at(2), 'm1', 'm1', 'streaming')],
      [update(at(5, 'b'), 'm1', 'chunk', 'streaming')],
      [update(at(4), 'm1', 'done', 'complete')],
    ]);
    expect(expected?.messages).toEqual(['m1:complete:done']);
  });

  it('a remove that arrives before its append keeps the message out; a replayed remove is not listed', async () => {
    const removal = remove(at(3), 'm1');
    const { expected, late } = await converge([[create(at(1)), removal], [append(at(2), 'm1')], [removal]]);
    expect(expected?.messages).toEqual([]);
    expect(late.applied[2]).toEqual([]);
  });
});

describe('applyOps: journal commits', () => {
  it('a commit counts every entry ordered up to the one it names, another device\'s earlier entry too', async () => {
    const { expected } = await converge([[create(at(1)), journal(at(2, 'b'), ['b'])], [journal(at(3), ['a0', 'a1']), commit(at(4), 2, subOrder(at(3), 1))]]);
    expect(expected?.journal).toEqual(['b', 'a0', 'a1']);
    expect(expected?.pending).toEqual([]);
  });

  it('a later commit moves the watermark forward', async () => {
    const { name, applied } = await replica([create(at(1)), journal(at(2), ['x', 'y', 'z']), commit(at(3), 1, subOrder(at(2), 0))], [commit(at(4), 2, subOrder(at(2), 1))]);
    expect(applied[1]).toHaveLength(1);
    expect((await view(name))?.pending).toEqual(['z']);
  });

  it('a commit without `through` (older data) that arrives before its entries commits them when they come, and no later ones', async () => {
    const { name, applied } = await replica([create(at(1)), commit(at(4), 2)], [journal(at(3), ['a0', 'a1'])], [journal(at(5), ['a2'])]);
    expect(applied.map((batch) => batch.length)).toEqual([2, 1, 1]);
    expect((await view(name))?.pending).toEqual(['a2']);
  });

  it('an older commit without `through` covering fewer entries changes nothing, before or after the entries', async () => {
    const { name, applied } = await replica([create(at(1)), commit(at(4), 2)], [commit(at(3), 1)], [journal(at(2), ['a0', 'a1', 'a2'])]);
    expect(applied[1]).toEqual([]);
    expect((await view(name))?.pending).toEqual(['a2']);
    const { name: after } = await replica([create(at(1)), journal(at(2), ['a0', 'a1', 'a2'])], [commit(at(4), 2)]);
    expect((await view(after))?.pending).toEqual(['a2']);
  });

  it('a commit without `through` is ignored once commits name their entry', async () => {
    const { name, applied } = await replica([create(at(1)), journal(at(2), ['x', 'y', 'z']), commit(at(3), 1, subOrder(at(2), 0))], [commit(at(4), 3)]);
    expect(applied[1]).toEqual([]);
    expect((await view(name))?.pending).toEqual(['y', 'z']);
  });
});

describe('applyOps: restores that arrive late or twice', () => {
  const before = [create(at(1)), append(at(2), 'm1'), checkpoint(at(3), [{ id: 'm1', order: at(2) }])];

  it('a restore that arrives after a later clear does not bring its messages back', async () => {
    const { expected } = await converge([before, [clear(at(5, 'b'))], [restore(at(4))]]);
    expect(expected?.messages).toEqual([]);
    expect(expected?.prefix).toBe('from checkpoint');
  });

  it('a replayed restore is not listed and does not bring back a message removed after it', async () => {
    const once = restore(at(4));
    const { name, applied } = await replica([...before, once], [remove(at(5), 'm1')], [once]);
    expect(applied[2]).toEqual([]);
    expect((await view(name))?.messages).toEqual([]);
  });

  it('a restore whose state and messages lost to later ops still sets the prefix when none was set after it', async () => {
    const { expected } = await converge([before, [clear(at(5, 'b')), save(at(6, 'b'), 2, { summary: 'later' })], [restore(at(4))]]);
    expect(expected).toMatchObject({ prefix: 'from checkpoint', messages: [], state: { summary: 'later' } });
  });

  it('a restore that loses on version and prefix still replaces the messages, and its state does not win', async () => {
    // m0 is ordered after the checkpoint and before the restore: the restore drops it.
    const { expected } = await converge([[...before, append(at(3, 'c'), 'm0')], [save(at(5, 'b'), 1, { summary: 'b saved' }), prefix(at(6, 'b'), 'later')], [restore(at(4))]]);
    expect(expected).toMatchObject({ prefix: 'later', messages: ['m1:complete:m1'], state: { summary: 'b saved' } });
  });

  it('a message row from before update registers carries its last update ordered after the restore to the copy', async () => {
    const name = uniqueName('legacy-update');
    const db = createDb(name);
    const apply = (ops: Op[]) => db.transaction('rw', sessionTables(db), async () => applyOps(db, ops));
    await apply([create(at(1)), append(at(2), 'm1', 'm1', 'streaming'), checkpoint(at(3), [{ id: 'm1', order: at(2) }], true), update(at(5, 'b'), 'm1', 'done', 'complete')]);
    // The row keeps its update (updateOrder); older data has no register beside it.
    await db.meta.delete(messageUpdatesKey(USER, SESSION, 'm1'));
    await apply([restore(at(4))]);
    db.close();
    expect((await view(name))?.messages).toEqual(['m1:complete:done']);
  });
});

describe('applyOps: saves, old lives, update registers and removes', () => {
  it('a save conflict on a row from before versionOrder existed reports the lost save with an empty order', async () => {
    const name = uniqueName('legacy-version');
    const db = createDb(name);
    const conflicts: SaveConflict[] = [];
    const apply = (ops: Op[]) => db.transaction('rw', sessionTables(db), async () => applyOps(db, ops, { conflicts }));
    await apply([create(at(1)), save(at(2), 1, { summary: 'old' })]);
    await db.sessions.update([USER, SESSION], { versionOrder: undefined });
    await apply([save(at(3, 'b'), 1, { summary: 'b' })]);
    db.close();
    expect(conflicts.map((c) => [c.lost.version, c.lost.order, c.won.version, c.won.order])).toEqual([[1, '', 1, at(3, 'b')]]);
  });

  it('a replayed save is not listed as applied', async () => {
    const saved = save(at(2), 1, { summary: 's' });
    const { applied } = await replica([create(at(1)), saved], [saved]);
    expect(applied[1]).toEqual([]);
  });

  it('an append from before lives were named, ordered before the create of the life a replica holds, is dropped', async () => {
    const { expected } = await converge([[create(at(1)), del(at(3)), create(at(4)), append(at(5), 'new')], [append(at(2, 'b'), 'old')]]);
    expect(expected?.messages).toEqual(['new:complete:new']);
  });

  // m1 is cleared before the restore that brings it back arrives: only its update register carries the updates to the copy.
  const cleared = [create(at(1)), append(at(2), 'm1', 'm1', 'streaming'), checkpoint(at(3), [{ id: 'm1', order: at(2) }], true), clear(at(3, 'c'))];

  it('the copy a restore brings back takes the latest update of each status ordered after it, whichever arrived first', async () => {
    const first = update(at(5, 'b'), 'm1', 'first', 'complete');
    const second = update(at(6), 'm1', 'second', 'complete');
    for (const updates of [[[first], [second]], [[second], [first]]]) {
      const { expected } = await converge([cleared, ...updates, [restore(at(4))]]);
      expect(expected?.messages).toEqual(['m1:complete:second']);
    }
  });

  it('a later streaming update carries to the streaming copy; an interrupted one never reopens a complete copy', async () => {
    const { expected } = await converge([cleared, [update(at(6), 'm1', 'chunk', 'streaming')], [restore(at(4))]]);
    // Opening the replica finds the stream dead (crash recovery): interrupted, with the chunk's text.
    expect(expected?.messages).toEqual(['m1:interrupted:chunk']);
    const complete = [create(at(1)), append(at(2), 'm1'), checkpoint(at(3), [{ id: 'm1', order: at(2) }])];
    const { expected: kept } = await converge([complete, [update(at(6), 'm1', 'cut', 'interrupted')], [restore(at(4))]]);
    expect(kept?.messages).toEqual(['m1:complete:m1']);
  });

  it('a remove takes the message and its count; a replayed append of it stays out', async () => {
    const m1 = append(at(2), 'm1');
    const { name, applied } = await replica([create(at(1)), m1, append(at(3), 'm2')], [remove(at(4), 'm1')], [m1]);
    expect(applied.map((batch) => batch.length)).toEqual([3, 1, 0]);
    expect(await view(name)).toMatchObject({ messages: ['m2:complete:m2'], messageCount: 1, info: { messageCount: 1 } });
  });

  it('of two removes of one message the later is listed, an earlier or replayed one is not', async () => {
    const later = remove(at(5, 'b'), 'm1');
    const { applied } = await replica([create(at(1)), append(at(2), 'm1'), remove(at(4), 'm1')], [remove(at(3, 'b'), 'm1')], [later], [later]);
    expect(applied.map((batch) => batch.length)).toEqual([3, 0, 1, 0]);
  });

  it('a remove ordered before a restore leaves the copy the restore made', async () => {
    const { expected } = await converge([[create(at(1)), append(at(2), 'm1'), checkpoint(at(3), [{ id: 'm1', order: at(2) }]), restore(at(5))], [remove(at(4, 'b'), 'm1')]]);
    expect(expected?.messages).toEqual(['m1:complete:m1']);
  });
});
