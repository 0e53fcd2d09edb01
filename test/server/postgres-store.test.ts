/**
 * postgresStore: the contract suite on the run's embedded PostgreSQL, once on
 * its default database and once on a database whose default collation is
 * ICU's `en-US`, each with a peer store (another instance, its own pool) to
 * prove pokes cross instances by LISTEN/NOTIFY; the borrowed-pool mode; what
 * a notification from another role can (not) do; reopening a lost LISTEN
 * connection; and the migration that records the lives of stored deletes.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { makeOp } from '../../src/core/index.js';
import { postgresStore, type ServerStore, type StorePokeItems } from '../../src/server/index.js';
import { databaseUrl } from './embedded-postgres.js';
import { boardWriter, decodePulled, noteOp, orderKey, uniqueUser, type DecodedItem } from './helpers.js';
import { runServerStoreTests } from './store-contract.js';

const url = inject('postgresUrl');
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

for (const [name, storeUrl] of [
  ['postgresStore', url],
  ['postgresStore on an ICU en-US database', inject('postgresIcuUrl')],
] as const) {
  runServerStoreTests(name, {
    async create(options) {
      const store = postgresStore(storeUrl, options);
      return {
        store,
        async reopen() {
          await store.close();
          return postgresStore(storeUrl, options);
        },
      };
    },
    async peer() {
      return postgresStore(storeUrl);
    },
  });
}

/** Runs `sql` as the cluster's superuser on database `postgres`. */
async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A new empty database on the run's cluster, for a test that must not share the channel or the tables. */
async function freshDatabase(prefix: string): Promise<string> {
  const name = `${prefix}_${randomUUID().replaceAll('-', '')}`;
  await admin(`CREATE DATABASE ${name}`);
  return databaseUrl(url, name);
}

/** Every poke of `userId` on `store`, decoded, as they come. */
async function pokesOf(store: ServerStore, userId: string): Promise<{ pokes: { head: number; appended?: { after: number; items: DecodedItem[] } }[]; off: () => void }> {
  const pokes: { head: number; appended?: { after: number; items: DecodedItem[] } }[] = [];
  const off = await store.subscribe(userId, (head: number, appended?: StorePokeItems) =>
    pokes.push(appended ? { head, appended: { after: appended.after, items: appended.items.map(decodePulled) } } : { head }),
  );
  return { pokes, off };
}

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

describe('a NOTIFY on the poke channel is only a hint', () => {
  let dbUrl = '';
  let hostile: pg.Client;
  beforeAll(async () => {
    dbUrl = await freshDatabase('tabula_notify');
    // A role that may connect (every role may, by default) and has no right on any Tabula table.
    await admin("DO $$ BEGIN CREATE ROLE tabula_hostile LOGIN PASSWORD 'hostile'; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
    const hostileUrl = new URL(dbUrl);
    hostileUrl.username = 'tabula_hostile';
    hostileUrl.password = 'hostile';
    hostile = new pg.Client({ connectionString: hostileUrl.toString() });
    await hostile.connect();
  });
  afterAll(async () => {
    await hostile.end();
  });

  it('another role’s notifications crash nothing, put nothing forged in a poke, and real pokes still arrive', async () => {
    const store = postgresStore(dbUrl);
    const peer = postgresStore(dbUrl);
    const alice = uniqueUser('alice');
    const bob = uniqueUser('bob');
    await store.push(alice, 'c', [1, 2].map((seq) => ({ seq, op: noteOp(alice, 's1', seq) })));
    await expect(hostile.query('SELECT count(*) FROM tabula_items')).rejects.toThrow(/permission denied/);
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const watched = [await pokesOf(store, alice), await pokesOf(peer, alice)];
      const bobs = await pokesOf(peer, bob);
      // The session and message a real device applied when pokes carried items.
      const forged = [
        [3, { clientId: 'evil', op: { id: randomUUID(), kind: 'session.create', userId: alice, sessionId: 'forged', order: orderKey(3, 'evil'), body: { title: 'forged' } } }],
        [4, { clientId: 'evil', op: noteOp(alice, 'forged', 4, 'forged') }],
      ];
      const payloads = [
        'not json',
        '',
        '{',
        'null',
        '42',
        '[1,2]',
        'x'.repeat(7_990),
        JSON.stringify({ u: alice, h: 'x'.repeat(7_900), a: 0 }),
        JSON.stringify({ u: 123, h: 5, a: 1 }),
        JSON.stringify({ u: alice, h: '5', a: 1 }),
        JSON.stringify({ u: alice, h: 1e300, a: 0 }),
        JSON.stringify({ u: alice, h: 5, a: -1 }),
        JSON.stringify({ u: alice, h: 5, a: 5 }),
        JSON.stringify({ u: alice, h: 2.5, a: 1 }),
        JSON.stringify({ u: alice, h: 5 }),
        JSON.stringify({ u: 'x'.repeat(257), h: 5, a: 0 }),
        JSON.stringify({ u: '\ud800', h: 5, a: 0 }),
        JSON.stringify({ u: { toString: alice }, h: 5, a: 0 }),
        // Forged items in the shape pokes once had: a head far ahead, items a device would apply.
        JSON.stringify({ u: alice, h: 1_000, a: 2, i: forged }),
        JSON.stringify({ u: alice, h: 4, a: 2, i: forged }),
        // Well-formed hints about positions that hold nothing, another user's id, a user no one watches.
        JSON.stringify({ u: alice, h: 999_999, a: 999_998 }),
        JSON.stringify({ u: bob, h: 10, a: 0 }),
        JSON.stringify({ u: 'nobody', h: 10, a: 0 }),
      ];
      for (const payload of payloads) await hostile.query('SELECT pg_notify($1, $2)', ['tabula_poke', payload]);
      // A real push after them: one channel delivers in commit order, so its poke comes after every one of them.
      await store.push(alice, 'c', [{ seq: 3, op: noteOp(alice, 's1', 3) }]);
      for (const { pokes } of watched) await expect.poll(() => pokes.some((poke) => poke.head === 3)).toBe(true);
      const real = (await peer.pull(alice, 0, 1000, UNBOUNDED)).items.map(decodePulled);
      for (const { pokes } of watched) {
        for (const poke of pokes) {
          // No head past the real one (a client would move its cursor past real items), no item that is not in the tables.
          expect(poke.head).toBeLessThanOrEqual(3);
          if (poke.appended) expect(poke.appended.items).toEqual(real.filter((item) => item.position > poke.appended!.after && item.position <= poke.head));
        }
        expect(JSON.stringify(pokes)).not.toMatch(/evil|forged/);
      }
      expect(bobs.pokes).toEqual([]);
      // Each store says once that something else sends on its channel, not once per notification.
      expect(warn.mock.calls.length).toBeGreaterThanOrEqual(1);
      expect(warn.mock.calls.length).toBeLessThanOrEqual(2);
      for (const { off } of [...watched, bobs]) off();
    } finally {
      warn.mockRestore();
      await peer.close();
      await store.close();
    }
  });

  it('a burst of hints for one user costs a few reads of the tables, not one each', async () => {
    const pool = new pg.Pool({ connectionString: dbUrl });
    let queries = 0;
    const counting = {
      connect: pool.connect.bind(pool),
      end: pool.end.bind(pool),
      query: (...args: unknown[]) => {
        queries++;
        return (pool.query as (...a: unknown[]) => unknown)(...args);
      },
    };
    const store = postgresStore(counting);
    const alice = uniqueUser('alice');
    try {
      const { pokes, off } = await pokesOf(store, alice);
      await store.push(alice, 'c', [{ seq: 1, op: noteOp(alice, 's1', 1) }]);
      await expect.poll(() => pokes.at(-1)?.head).toBe(1);
      const before = queries;
      // One transaction: PostgreSQL delivers its 200 notifications together, at commit.
      await hostile.query('BEGIN');
      for (let h = 2; h < 202; h++) await hostile.query('SELECT pg_notify($1, $2)', ['tabula_poke', JSON.stringify({ u: alice, h, a: h - 1 })]);
      await hostile.query('COMMIT');
      await store.push(alice, 'c', [{ seq: 2, op: noteOp(alice, 's1', 2) }]);
      await expect.poll(() => pokes.at(-1)?.head).toBe(2);
      // The push's own statement and notification, and the reads: far fewer than the 201 hints.
      expect(queries - before).toBeLessThan(20);
      expect(pokes.every((poke) => poke.head <= 2)).toBe(true);
      off();
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it('after its LISTEN connection is lost, a store reads what it missed from the tables and pokes with it', async () => {
    // Long enough that the push below lands while nothing listens (it still passes if it does not).
    const store = postgresStore(dbUrl, { reconnectMs: 2_000 });
    const pusher = postgresStore(dbUrl);
    const alice = uniqueUser('alice');
    try {
      await pusher.push(alice, 'c', [{ seq: 1, op: noteOp(alice, 's1', 1) }]);
      const { pokes, off } = await pokesOf(store, alice);
      await pusher.push(alice, 'c', [{ seq: 2, op: noteOp(alice, 's1', 2) }]);
      await expect.poll(() => pokes.at(-1)?.head).toBe(2);
      const database = new URL(dbUrl).pathname.slice(1);
      const killer = new pg.Client({ connectionString: url });
      await killer.connect();
      try {
        const killed = await killer.query<{ done: boolean }>("SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = $1 AND query = 'LISTEN tabula_poke'", [database]);
        expect(killed.rows.map((row) => row.done)).toContain(true);
      } finally {
        await killer.end();
      }
      await pusher.push(alice, 'c', [{ seq: 3, op: noteOp(alice, 's1', 3) }]);
      await expect.poll(() => pokes.at(-1)?.head).toBe(3);
      const last = pokes.at(-1)!;
      if (last.appended) expect(last.appended.items.map((item) => item.position)).toEqual([3]);
      off();
    } finally {
      await pusher.close();
      await store.close();
    }
  });
});

it('records the lives of deletes stored before lives were recorded, so boards of those lives still land', async () => {
  const legacyUrl = await freshDatabase('tabula_legacy');
  const alice = uniqueUser('alice');
  const life = orderKey(7, 'old');
  const client = new pg.Client({ connectionString: legacyUrl });
  await client.connect();
  try {
    // The tables as a store created them before tabula_lives, holding a delete and a note whose text
    // would trip a JSON parse in SQL (a lone surrogate) and names the delete kind.
    await client.query(`CREATE TABLE tabula_heads (user_id text PRIMARY KEY, head bigint NOT NULL);
      CREATE TABLE tabula_clients (user_id text NOT NULL, client_id text NOT NULL, last_seq bigint NOT NULL, PRIMARY KEY (user_id, client_id));
      CREATE TABLE tabula_items (user_id text NOT NULL, position bigint NOT NULL, client_id text, session_id text NOT NULL, op text, board bytea, life_after text, PRIMARY KEY (user_id, position));`);
    const remove = makeOp('session.delete', { id: randomUUID(), userId: alice, sessionId: 's1', order: life, body: {} });
    const note = noteOp(alice, 's2', 2, '\ud800 "session.delete"');
    await client.query("INSERT INTO tabula_items VALUES ($1, 1, 'c', 's1', $2, NULL, NULL), ($1, 2, 'c', 's2', $3, NULL, NULL)", [alice, JSON.stringify(remove), JSON.stringify(note)]);
    await client.query('INSERT INTO tabula_heads VALUES ($1, 2)', [alice]);
    await client.query("INSERT INTO tabula_clients VALUES ($1, 'c', 2)", [alice]);
  } finally {
    await client.end();
  }
  const store = postgresStore(legacyUrl);
  try {
    const board = boardWriter();
    expect(await store.push(alice, 'c', [{ seq: 3, board: { sessionId: 's1', update: board.write('k', 'v'), after: life } }])).toMatchObject({ status: 'applied', head: 3 });
    expect(await store.push(alice, 'c', [{ seq: 4, board: { sessionId: 's2', update: board.write('k', 'w'), after: life } }])).toEqual({ status: 'unknown-life', index: 0 });
  } finally {
    await store.close();
  }
});
