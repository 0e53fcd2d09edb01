/**
 * A database written by schema version 1 opens under the current version
 * with every row intact and the new indexes usable. The fixture is built
 * with the version-1 store definitions, as a v1 build of Tabula wrote it.
 */
import { Dexie } from 'dexie';
import { describe, expect, it } from 'vitest';
import { openTabula } from '../../../src/index.js';
import { SCHEMA_VERSION } from '../../../src/store/schema.js';
import { uniqueName } from './helpers.js';

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
    const complete = await raw.table('messages').where('[userId+sessionId+status]').equals(['alice', 'old', 'complete']).count();
    expect(complete).toBe(2);
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
});
