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
import { boardWriter, decodePulled } from './helpers.js';
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
  const items = (await store.pull('alice', 0, 10)).items.map(decodePulled);
  expect(items.map((item) => ('board' in item ? item.board.after ?? null : 'op'))).toEqual([null, '']);
  await store.close();
});
