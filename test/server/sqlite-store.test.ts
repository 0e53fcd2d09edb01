/**
 * sqliteStore: the contract suite on a temp file (reopened to prove the data
 * is on disk), plus what is SQLite's own: WAL with synchronous=FULL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, expect, it } from 'vitest';
import { sqliteStore } from '../../src/server/index.js';
import { makeOp } from '../../src/core/index.js';
import { boardWriter, decodePulled, noteOp, orderKey } from './helpers.js';
import { runServerStoreTests } from './store-contract.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

runServerStoreTests('sqliteStore', {
  async create(options) {
    const file = path.join(dir, `store-${++n}.db`);
    const store = sqliteStore(file, options);
    return {
      store,
      async reopen() {
        await store.close();
        return sqliteStore(file, options);
      },
    };
  },
});

it('opens the file in WAL mode with synchronous=FULL', async () => {
  const file = path.join(dir, 'pragmas.db');
  const store = sqliteStore(file);
  await store.head('nobody');
  const db = new Database(file, { readonly: true });
  expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  db.close();
  await store.close();
});

it('adds the board life column to a database created before lives were named, keeping its rows', async () => {
  const file = path.join(dir, 'before-lives.db');
  const old = new Database(file);
  // The tabula_items table as the store created it before board updates named their session life.
  old.exec(`CREATE TABLE tabula_items (
    user_id TEXT NOT NULL, position INTEGER NOT NULL, client_id TEXT, session_id TEXT NOT NULL,
    op TEXT, board BLOB,
    PRIMARY KEY (user_id, position)) WITHOUT ROWID;
    CREATE TABLE tabula_heads (user_id TEXT PRIMARY KEY, head INTEGER NOT NULL) WITHOUT ROWID;`);
  const legacy = boardWriter();
  old.prepare('INSERT INTO tabula_items VALUES (?, 1, ?, ?, NULL, ?)').run('alice', 'c', 's1', legacy.write('k', 'v'));
  old.prepare('INSERT INTO tabula_heads VALUES (?, 1)').run('alice');
  old.close();
  const store = sqliteStore(file);
  const renewed = boardWriter();
  await store.push('alice', 'c', [{ seq: 1, board: { sessionId: 's1', update: renewed.write('n', 'w'), after: '' } }]);
  const items = (await store.pull('alice', 0, 10, Number.MAX_SAFE_INTEGER)).items.map(decodePulled);
  expect(items.map((item) => ('board' in item ? item.board.after ?? null : 'op'))).toEqual([null, '']);
  await store.close();
});

it('records the lives of deletes stored before lives were recorded, so boards of those lives still land', async () => {
  const file = path.join(dir, 'before-recorded-lives.db');
  const old = new Database(file);
  const life = orderKey(7, 'old');
  // The tables as the store created them before tabula_lives, holding a delete and a note whose text
  // names the delete kind and holds a lone surrogate (escaped in the JSON).
  old.exec(`CREATE TABLE tabula_heads (user_id TEXT PRIMARY KEY, head INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE tabula_clients (user_id TEXT NOT NULL, client_id TEXT NOT NULL, last_seq INTEGER NOT NULL, PRIMARY KEY (user_id, client_id)) WITHOUT ROWID;
    CREATE TABLE tabula_items (user_id TEXT NOT NULL, position INTEGER NOT NULL, client_id TEXT, session_id TEXT NOT NULL, op TEXT, board BLOB, life_after TEXT, PRIMARY KEY (user_id, position)) WITHOUT ROWID;`);
  const remove = makeOp('session.delete', { id: 'd1', userId: 'alice', sessionId: 's1', order: life, body: {} });
  const note = noteOp('alice', 's2', 2, '\ud800 "session.delete"');
  const insert = old.prepare("INSERT INTO tabula_items VALUES ('alice', ?, 'c', ?, ?, NULL, NULL)");
  insert.run(1, 's1', JSON.stringify(remove));
  insert.run(2, 's2', JSON.stringify(note));
  old.exec("INSERT INTO tabula_heads VALUES ('alice', 2); INSERT INTO tabula_clients VALUES ('alice', 'c', 2);");
  old.close();
  const store = sqliteStore(file);
  const board = boardWriter();
  expect(await store.push('alice', 'c', [{ seq: 3, board: { sessionId: 's1', update: board.write('k', 'v'), after: life } }])).toMatchObject({ status: 'applied', head: 3 });
  expect(await store.push('alice', 'c', [{ seq: 4, board: { sessionId: 's2', update: board.write('k', 'w'), after: life } }])).toEqual({ status: 'unknown-life', index: 0 });
  await store.close();
});
