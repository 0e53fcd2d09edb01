/**
 * A database written by schema version 1 (or 2) opens under the current
 * version with every row intact and the new indexes usable. The fixtures
 * are built with the old store definitions, as an old build of Tabula wrote
 * them.
 */
import { Dexie } from 'dexie';
import { describe, expect, it } from 'vitest';
import { openTabula } from '../../../../src/index.js';
import { SCHEMA_VERSION, createDb } from '../../../../src/store/db/schema.js';
import { checkRow } from '../../../../src/store/db/rows.js';
import { uniqueName } from '../helpers.js';

/** Version 1 of the stores, verbatim, as a v1 build of Tabula declared them. */
const STORES_V1 = {
  sessions: '[userId+sessionId], [userId+updatedAt]',
  messages: '[userId+sessionId+id], [userId+sessionId+order]',
  journal: 'id, [userId+sessionId+order]',
  notes: 'id, [userId+sessionId+order]',
  memory: '[userId+sessionId+scope+key], [userId+sessionId+scope]',
  runs: 'runId, [userId+sessionId+scope]',
  checkpoints: 'id, [userId+sessionId]',
  outbox: '++seq',
  meta: 'key',
};

const order = (ms: number) => `${String(ms).padStart(15, '0')}.000000.fixture`;

async function writeV1Fixture(name: string): Promise<void> {
  const v1 = new Dexie(name);
  v1.version(1).stores(STORES_V1);
  await v1.open();
  await v1.table('sessions').put({
    userId: 'alice',
    sessionId: 'old',
    version: 3,
    prefix: { systemPrompt: 'from v1', grounding: [], schemaBlock: null },
    prefixOrder: order(1),
    summaryOrder: '',
    createdOrder: order(1),
    clearedBefore: '',
    state: { summary: 'kept', tasks: ['t'], plan: null, permissions: null, tools: [], context: {} },
    messageCount: 2,
    journalCount: 0,
    journalWatermark: 0,
    createdAt: 1,
    updatedAt: 3,
    lastOrder: order(3),
    forkOf: null,
    tokenTotals: {},
  });
  await v1.table('messages').bulkPut([
    { id: 'm1', userId: 'alice', sessionId: 'old', order: order(2), createdAt: 2, status: 'complete', message: { role: 'user', content: 'hello from v1' }, tokens: {} },
    { id: 'm2', userId: 'alice', sessionId: 'old', order: order(3), createdAt: 3, status: 'streaming', message: { role: 'assistant', content: 'cut o' }, tokens: {} },
  ]);
  await v1.table('runs').put({ runId: 'r1', userId: 'alice', sessionId: 'old', scope: 'default', visit: 1, attempt: 1, status: 'running', startedAt: 2, endedAt: null });
  v1.close();
}

/** Every store of an open database with its primary key and indexes, as IndexedDB reports them. */
const storesOf = (db: Dexie) =>
  db.tables
    .map((table) => [table.name, table.schema.primKey.src, table.schema.indexes.map((index) => index.src).sort()] as const)
    .sort(([a], [b]) => a.localeCompare(b));

describe('schema upgrade', () => {
  it(`opens a version-1 database under version ${SCHEMA_VERSION} with its data intact`, async () => {
    const name = uniqueName('v1');
    await writeV1Fixture(name);
    const tabula = await openTabula({ name, userId: 'alice' });
    const session = await tabula.session('old');
    const messages = await session.messages();
    expect(messages.map((m) => m.content)).toEqual(['hello from v1', 'cut o']);
    // The v1 stream and run were left by a tab that is gone: recovered on open through the new indexes.
    expect(messages.map((m) => m.status)).toEqual(['complete', 'interrupted']);
    expect((await session.runs()).map((r) => [r.runId, r.status])).toEqual([['r1', 'abandoned']]);
    expect(await session.state()).toMatchObject({ version: 3, summary: 'kept', tasks: ['t'] });
    expect((await session.prefix()).systemPrompt).toBe('from v1');
    await session.append({ role: 'user', content: 'written by v2' });
    expect(await session.messageCount()).toBe(3);
    await tabula.close();

    const raw = new Dexie(name);
    await raw.open();
    expect(raw.verno).toBe(SCHEMA_VERSION);
    // Version 4 dropped the status index; the stream index is empty once recovery finished the stream.
    expect(Object.keys(raw.table('messages').schema.idxByName).sort()).toEqual(['[userId+sessionId+order]', '[userId+sessionId+streaming]']);
    expect(await raw.table('messages').where('[userId+sessionId+streaming]').equals(['alice', 'old', 1]).count()).toBe(0);
    // The upgraded database has exactly the stores and indexes of one created by this version.
    const fresh = uniqueName('fresh');
    await (await openTabula({ name: fresh })).close();
    const created = new Dexie(fresh);
    await created.open();
    expect(storesOf(raw)).toEqual(storesOf(created));
    expect(storesOf(raw).map(([table]) => table)).toContain('outbox');
    raw.close();
    created.close();
  });

  it('marks the messages a version-2 database holds as streaming, in every session, and only those', async () => {
    const name = uniqueName('v2');
    const v2 = new Dexie(name);
    // Version 2's stores as a v2 build declared them.
    v2.version(1).stores(STORES_V1);
    v2.version(2).stores({
      messages: '[userId+sessionId+id], [userId+sessionId+order], [userId+sessionId+status]',
      runs: 'runId, [userId+sessionId+scope], [userId+sessionId+status]',
    });
    await v2.open();
    await v2.table('sessions').bulkPut(['a', 'b', 'c'].map((sessionId) => ({ userId: 'alice', sessionId })));
    const row = (sessionId: string, id: string, status: string) => ({
      id,
      userId: 'alice',
      sessionId,
      order: order(Number(id.slice(1))),
      createdAt: 1,
      status,
      message: { role: 'assistant', content: id },
      tokens: {},
    });
    await v2.table('messages').bulkPut([
      row('a', 'm1', 'complete'),
      row('a', 'm2', 'streaming'),
      row('a', 'm3', 'interrupted'),
      row('a', 'm4', 'streaming'),
      row('b', 'm5', 'streaming'),
      row('c', 'm6', 'complete'),
    ]);
    v2.close();

    // Upgraded without a Tabula, so recovery has not touched the streams yet.
    const db = createDb(name);
    await db.open();
    try {
      expect(db.verno).toBe(SCHEMA_VERSION);
      const marked = await db.messages.where('[userId+sessionId+streaming]').between(['alice', Dexie.minKey, 1], ['alice', Dexie.maxKey, 1]).primaryKeys();
      expect(marked.map(([, sessionId, id]) => `${sessionId}/${id}`).sort()).toEqual(['a/m2', 'a/m4', 'b/m5']);
      // Every row reads back valid: the marker matches the status, and the others are unchanged.
      const rows = await db.messages.toArray();
      for (const stored of rows) expect(checkRow('messages', stored.id, stored)).toBe(stored);
      expect(rows.filter((stored) => stored.streaming === undefined).map((stored) => stored.id).sort()).toEqual(['m1', 'm3', 'm6']);
    } finally {
      db.close();
    }
  });
});
