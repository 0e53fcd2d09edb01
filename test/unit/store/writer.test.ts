/**
 * What a local write queues for sync (src/store/writer.ts): only the ops of
 * the user this profile syncs as, never a stream's in-between states, in
 * seq order 1, 2, 3… with no gap (the server refuses gaps); each op names
 * the life of its session it was written in; a write while sync is off
 * queues nothing (test/unit/sync/client.test.ts: a committed write is pushed
 * without waiting for a poll).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Tabula } from '../../../src/index.js';
import { dexieRequests } from '../../../src/store/requests.js';
import { createDb } from '../../../src/store/db/schema.js';
import { type OutboxRow } from '../../../src/store/db/rows.js';
import { syncNames } from '../../../src/store/replication/keys.js';
import { queueOutbox } from '../../../src/store/replication/outbox.js';
import { httpSync } from '../../../src/sync/index.js';
import { freshTabula, uniqueName } from './helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});

async function outboxOf(name: string): Promise<OutboxRow[]> {
  const db = createDb(name);
  try {
    return await db.outbox.toArray();
  } finally {
    db.close();
  }
}

const opKinds = (rows: readonly OutboxRow[]) => rows.map((row) => (row.op ? `${row.op.userId}:${row.op.kind}` : 'board'));

describe('the outbox a local write fills', () => {
  it('holds only the synced user’s ops, without a stream’s partial states, numbered without a gap', async () => {
    // A device that never reaches its server (every request fails) and is paused: the outbox keeps every row.
    const offline = () => Promise.reject(new Error('offline'));
    const tabula = await freshTabula({ userId: 'alice', sync: httpSync({ url: 'http://sync.test', token: 'token', fetch: offline, pollIntervalMs: 3_600_000 }) });
    tabula.sync?.pause();
    opened.push(tabula);
    const mine = await tabula.session('chat');
    await mine.append({ role: 'user', content: 'hi' });
    // Another user's session on the same profile: stored here, never sent as alice's.
    const theirs = await tabula.session('chat', { userId: 'bob' });
    await theirs.append({ role: 'user', content: 'not for alice' });
    await theirs.note('bob only');
    const stream = await mine.stream({ role: 'assistant' });
    stream.write('Hel');
    stream.write('lo');
    await stream.done();
    await mine.note('done');

    const rows = await outboxOf(tabula.dbName);
    expect(rows.map((row) => row.seq)).toEqual(rows.map((_, index) => index + 1));
    expect(opKinds(rows)).toEqual(['alice:session.create', 'alice:message.append', 'alice:message.update', 'alice:note.add']);
    // The stream's op that reached the outbox is its final state, not a partial one.
    const update = rows[2]?.op;
    expect(update?.kind === 'message.update' && update.body.status).toBe('complete');
    expect((await theirs.messages()).map((m) => m.content)).toEqual(['not for alice']);
  });

  it('stays empty while sync is off', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    opened.push(tabula);
    const session = await tabula.session('chat');
    await session.append({ role: 'user', content: 'hi' });
    await session.note('n');
    expect(await outboxOf(tabula.dbName)).toEqual([]);
  });

  it('never holds a stream’s in-between states, even once a chunk was flushed', async () => {
    const offline = () => Promise.reject(new Error('offline'));
    const tabula = await freshTabula({ userId: 'alice', sync: httpSync({ url: 'http://sync.test', token: 'token', fetch: offline, pollIntervalMs: 3_600_000 }) });
    tabula.sync?.pause();
    opened.push(tabula);
    const session = await tabula.session('chat');
    // The chunk's flush is a message.update with status 'streaming': wait for it to be announced.
    const flushed = new Promise<void>((resolve) => {
      const stop = session.subscribe((change) => {
        if (!change.kinds.includes('message.update')) return;
        stop();
        resolve();
      });
    });
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
    stream.write('Hel');
    await flushed;
    expect((await session.messages()).map((m) => [m.content, m.status])).toEqual([['Hel', 'streaming']]);
    stream.write('lo');
    await stream.done();
    const rows = await outboxOf(tabula.dbName);
    expect(opKinds(rows)).toEqual(['alice:session.create', 'alice:message.update']);
    const update = rows[1]?.op;
    expect(update?.kind === 'message.update' && [update.body.status, update.body.message.content]).toEqual(['complete', 'Hello']);
  });

  it('names the life each op was written in: a re-created session’s ops name the delete that ended the last one', async () => {
    // Another replica places an op by the life it names, not by its order (store/apply/lives.ts, enterLife): an op
    // that named none, or the wrong one, would be dropped there or brought into the wrong life.
    const offline = () => Promise.reject(new Error('offline'));
    const tabula = await freshTabula({ userId: 'alice', sync: httpSync({ url: 'http://sync.test', token: 'token', fetch: offline, pollIntervalMs: 3_600_000 }) });
    tabula.sync?.pause();
    opened.push(tabula);
    await (await tabula.session('chat')).append({ role: 'user', content: 'first life' });
    await tabula.deleteSession('chat');
    await (await tabula.session('chat')).append({ role: 'user', content: 'second life' });

    const ops = (await outboxOf(tabula.dbName)).map((row) => row.op);
    expect(ops.map((op) => op?.kind)).toEqual(['session.create', 'message.append', 'session.delete', 'session.create', 'message.append']);
    const deleted = ops[2]?.order;
    expect(ops.map((op) => op?.after)).toEqual(['', '', '', deleted, deleted]);
  });
});

describe('queueOutbox', () => {
  it('refuses a seq the outbox already holds (the counter is behind it), naming the seqs, and lands nothing', async () => {
    const db = createDb(uniqueName('outbox'));
    try {
      // Other code put rows at seq 2 and 3 without moving the counter, which says 0.
      const foreign: OutboxRow[] = [2, 3].map((seq) => ({ seq, userId: 'alice', board: { sessionId: 's', update: 'AA==' } }));
      await db.outbox.bulkAdd(foreign);
      const items = [1, 2, 3, 4].map((n) => ({ board: { sessionId: 's', update: `update-${n}` } }));
      const refused = await db
        .transaction('rw', [db.outbox, db.meta], () => queueOutbox(dexieRequests(db), 'alice', items))
        .then(() => null, (error: unknown) => error);
      // Dexie passes it on with the original's name and text, its own stack appended.
      expect(refused).toMatchObject({ name: 'ConstraintError' });
      expect((refused as Error).message).toMatch(/^The sync outbox already holds seq 2, 3 of user "alice"\n/);
      expect(await db.outbox.toArray()).toEqual(foreign);
      expect(await db.meta.get(syncNames.seq('alice'))).toBeUndefined();
      // Nothing to queue: nothing read or written.
      expect(await db.transaction('rw', [db.outbox, db.meta], () => queueOutbox(dexieRequests(db), 'alice', []))).toEqual([]);
    } finally {
      db.close();
    }
  });
});
