/**
 * What a profile held before sync was on, queued as ops (src/store/replication/seed.ts);
 * test/unit/sync/seed.test.ts shows such data reaching another device whole.
 * This reads the queued ops themselves. The class of bug this guards: an op
 * for something that is not there (a prefix never set, a save never made, a
 * reply still streaming), another user's sessions queued under this one, an
 * op that does not name its session's life, ops whose ids differ from the
 * rows they rebuild (a note or journal entry that also reached the outbox
 * the usual way would then apply twice), a deleted memory key queued as set,
 * and a profile queued again on every open, or again after an upgrade
 * because the persisted markers (`sync:seeded:<user>`, the user's outbox
 * seq counter `sync:seq:["<user>"]`) changed name.
 */
import { describe, expect, it } from 'vitest';
import { PrefixContext } from '../../../../src/index.js';
import type { Op } from '../../../../src/core/ops.js';
import { createDb, type TabulaDb } from '../../../../src/store/db/schema.js';
import { messageRow } from '../../../../src/store/db/rows.js';
import { seedOutbox } from '../../../../src/store/replication/seed.js';
import { freshTabula, uniqueName } from '../helpers.js';

async function queuedOps(db: TabulaDb): Promise<Op[]> {
  // In primary-key order: by user, then seq.
  return (await db.outbox.toArray()).flatMap((row) => (row.op ? [row.op] : []));
}

describe('seedOutbox', () => {
  it('queues the ops that rebuild each of the user’s sessions, with the ids and order keys of its rows', async () => {
    const name = uniqueName('seed');
    const tabula = await freshTabula({ name, userId: 'alice' });
    const chat = await tabula.session('chat');
    await chat.setPrefix(new PrefixContext({ systemPrompt: 'be brief' }));
    await chat.append([{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }]);
    await chat.save({ summary: 'first' });
    await chat.checkpoint('cp');
    await chat.journal.apply([1]);
    await chat.journal.markCommitted();
    await chat.journal.apply([2]);
    await chat.note('noted');
    await chat.memory('m').set('kept', { a: 1 });
    await chat.memory('m').set('gone', 1);
    await chat.memory('m').delete('gone');
    // A session with nothing but its create: no prefix, no save.
    await (await tabula.session('bare')).messageCount();
    await (await tabula.session('bare')).append({ role: 'user', content: 'hi' });
    await tabula.close();
    const other = await freshTabula({ name, userId: 'bob' });
    await (await other.session('bobs')).append({ role: 'user', content: 'not alice’s' });
    await other.close();

    const db = createDb(name);
    try {
      const [row] = await db.sessions.where('[userId+sessionId]').equals(['alice', 'chat']).toArray();
      const streaming = messageRow({ id: 'streaming', userId: 'alice', sessionId: 'chat', order: '~', createdAt: 1, status: 'streaming', message: { role: 'assistant', content: 'half' } });
      await db.messages.add(streaming);
      const seqBefore = (await db.meta.get('sync:seq:["alice"]'))?.value;
      expect(seqBefore).toBeUndefined();
      await seedOutbox(db, 'alice');
      const ops = await queuedOps(db);
      expect(new Set(ops.map((op) => op.userId))).toEqual(new Set(['alice']));
      const chatOps = ops.filter((op) => op.sessionId === 'chat');
      expect(chatOps.map((op) => op.kind)).toEqual([
        'session.create',
        'prefix.set',
        'state.save',
        'checkpoint.create',
        'message.append',
        'message.append',
        'journal.append',
        'journal.append',
        'journal.commit',
        'note.add',
        'memory.delete',
        'memory.set',
      ]);
      // Every op names the session's life, as the writer stamped it.
      expect(row?.after).toBeDefined();
      for (const op of chatOps) expect(op.after).toBe(row?.after);
      const [create, prefix, save, checkpointOp] = chatOps;
      const [checkpoint] = await db.checkpoints.toArray();
      expect(checkpointOp).toMatchObject({ order: checkpoint?.order, body: { id: checkpoint?.id, label: 'cp', at: checkpoint?.at, snapshot: checkpoint?.snapshot } });
      expect(create).toMatchObject({ order: row?.createdOrder, body: { createdAt: row?.createdAt, forkOf: row?.forkOf } });
      expect(prefix).toMatchObject({ order: row?.prefixOrder, body: { prefix: row?.prefix } });
      expect(save).toMatchObject({ order: row?.versionOrder, body: { version: row?.version, patch: row?.state } });
      const messages = await db.messages.where('[userId+sessionId+order]').between(['alice', 'chat', ''], ['alice', 'chat', '\uffff']).toArray();
      expect(chatOps.filter((op) => op.kind === 'message.append').map((op) => [op.order, (op.body as { id: string }).id])).toEqual(
        messages.filter((m) => m.status !== 'streaming').map((m) => [m.order, m.id]),
      );
      // Journal entries go back in the ops that made them (row `${op.id}:${index}` at subOrder(op.order, index)), and notes keep
      // their row ids: queued twice, or pulled by a replica that has them already, they apply once.
      const journal = await db.journal.orderBy('[userId+sessionId+order]').toArray();
      expect(chatOps.filter((op) => op.kind === 'journal.append').map((op) => [`${op.id}:0`, `${op.order}#00000000`, op.body])).toEqual(journal.map((entry) => [entry.id, entry.order, { entries: [entry.entry] }]));
      const commit = chatOps.find((op) => op.kind === 'journal.commit');
      expect(commit).toMatchObject({ body: { watermark: 1, through: row?.journalThrough ?? journal[0]?.order } });
      const [note] = await db.notes.toArray();
      expect(chatOps.find((op) => op.kind === 'note.add')).toMatchObject({ id: note?.id, order: note?.order, body: { text: 'noted', runId: null, scope: null, at: note?.at } });
      expect(chatOps.filter((op) => op.kind.startsWith('memory.')).map((op) => op.body)).toEqual([
        { scope: 'm', key: 'gone' },
        { scope: 'm', key: 'kept', value: { a: 1 } },
      ]);
      // The bare session: its create and its message only.
      expect(ops.filter((op) => op.sessionId === 'bare').map((op) => op.kind)).toEqual(['session.create', 'message.append']);
      // Ids are fresh where no row names one, and distinct.
      expect(new Set(ops.map((op) => op.id)).size).toBe(ops.length);
      // The seq counter moved with the queue, under its persisted name.
      expect((await db.meta.get('sync:seq:["alice"]'))?.value).toBe(ops.length);
      expect(await db.meta.get('sync:seeded:alice')).toEqual({ key: 'sync:seeded:alice', value: true });

      // Once per profile and user: again, nothing more is queued; bob's sessions are his own seed's.
      await seedOutbox(db, 'alice');
      expect(await queuedOps(db)).toHaveLength(ops.length);
      await seedOutbox(db, 'bob');
      expect((await queuedOps(db)).slice(ops.length).map((op) => [op.userId, op.sessionId, op.kind])).toEqual([
        ['bob', 'bobs', 'session.create'],
        ['bob', 'bobs', 'message.append'],
      ]);
    } finally {
      db.close();
    }
  });

  it('a profile marked seeded by an earlier version is not queued again; the user’s seq counter is continued', async () => {
    const name = uniqueName('seed');
    const tabula = await freshTabula({ name, userId: 'alice' });
    await (await tabula.session('s')).append({ role: 'user', content: 'x' });
    await tabula.close();
    const db = createDb(name);
    try {
      await db.meta.bulkPut([
        { key: 'sync:seeded:carol', value: true },
        { key: 'sync:seq:["alice"]', value: 41 },
      ]);
      await db.outbox.add({ seq: 41, userId: 'alice', board: { sessionId: 's', update: 'AAA=' } });
      await seedOutbox(db, 'alice');
      const rows = await db.outbox.toArray();
      expect(rows.map((row) => [row.seq, row.op?.kind ?? 'board'])).toEqual([
        [41, 'board'],
        [42, 'session.create'],
        [43, 'message.append'],
      ]);
      await db.sessions.clear();
      await db.meta.put({ key: 'sync:seeded:alice', value: true });
      await seedOutbox(db, 'carol');
      expect(await db.outbox.count()).toBe(3);
    } finally {
      db.close();
    }
  });

  it('a session row from before lives, save orders and journal bounds were stored: ops without a life, the save at the create, the commit at the last committed entry', async () => {
    const name = uniqueName('seed');
    const tabula = await freshTabula({ name, userId: 'alice' });
    const chat = await tabula.session('old');
    await chat.save({ summary: 's' });
    await chat.journal.apply([1]);
    await chat.journal.apply([2]);
    await chat.journal.markCommitted();
    await chat.journal.apply([3]);
    await tabula.close();
    const db = createDb(name);
    try {
      // As an earlier version left it: no `after`, no `versionOrder`, no `journalThrough`.
      await db.sessions.update(['alice', 'old'], (row) => {
        delete row.after;
        delete row.versionOrder;
        delete row.journalThrough;
      });
      const row = await db.sessions.get(['alice', 'old']);
      await seedOutbox(db, 'alice');
      const ops = await queuedOps(db);
      for (const op of ops) expect('after' in op).toBe(false);
      expect(ops.find((op) => op.kind === 'state.save')).toMatchObject({ order: row?.createdOrder, body: { version: 1 } });
      const journal = await db.journal.orderBy('[userId+sessionId+order]').toArray();
      expect(journal).toHaveLength(3);
      const commit = ops.find((op) => op.kind === 'journal.commit');
      expect(commit).toMatchObject({ order: journal[1]?.order.replace(/#\d{8}$/, ''), body: { watermark: 2, through: journal[1]?.order } });
    } finally {
      db.close();
    }
  });
});
