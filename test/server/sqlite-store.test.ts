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
