/**
 * postgresStore: the contract suite on the run's embedded PostgreSQL, with a
 * peer store (another instance, its own pool) to prove pokes cross instances
 * by LISTEN/NOTIFY; and the borrowed-pool mode.
 */
import pg from 'pg';
import { expect, inject, it } from 'vitest';
import { postgresStore } from '../../src/server/index.js';
import { noteOp, uniqueUser } from './helpers.js';
import { runServerStoreTests } from './store-contract.js';

const url = inject('postgresUrl');

runServerStoreTests('postgresStore', {
  async create(options) {
    const store = postgresStore(url, options);
    return {
      store,
      async reopen() {
        await store.close();
        return postgresStore(url, options);
      },
    };
  },
  async peer() {
    return postgresStore(url);
  },
});

it('borrows a pg.Pool without ending it', async () => {
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  const store = postgresStore(pool);
  const alice = uniqueUser('alice');
  await store.push(alice, 'c', [{ seq: 1, op: noteOp(alice, 's', 1) }]);
  await store.close();
  const rows = await pool.query<{ n: string }>('SELECT count(*) AS n FROM tabula_items WHERE user_id = $1', [alice]);
  expect(rows.rows[0]?.n).toBe('1');
  await pool.end();
});
