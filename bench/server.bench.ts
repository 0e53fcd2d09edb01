/**
 * The sync server as it is deployed: the `tabula-server` CLI in a process of
 * its own, over real HTTP, with CLIENTS concurrent clients (Node's fetch, in
 * this process, parsing every answer). Push and pull throughput on SQLite and
 * on PostgreSQL, each beside the same rows written and read with the raw
 * driver in this process in the same run, and poke latency on one instance
 * and across two PostgreSQL instances.
 * Run with `npm run bench server` (or `npx tsx bench/server.bench.ts`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { Op } from '../src/core/index.js';
import { createSyncServer, postgresStore, sqliteStore, type ServerStore } from '../src/server/index.js';
import { startPostgres } from '../test/server/embedded-postgres.js';
import { SECRET, noteOp, sseReader, tokenFor } from '../test/server/helpers.js';
import { quantile } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const CLIENTS = 4;
const PUSHES = 25;
const BATCH = 100;
const PAGE = 1000;
const POKES = 60;
// The machine is shared: each figure is the best of ROUNDS, server and raw driver measured alternately.
const ROUNDS = 5;
const best = (values: number[]): number => Math.max(...values);

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-bench-server-'));
const postgres = await startPostgres({ durable: true });
const rows: BenchRow[] = [];

/**
 * Every client's pushes, prepared ahead so only the server's work is timed.
 * Each client is another user's device: a server's load is many users, and one
 * user's pushes commit one at a time by design (their order is the pull order).
 */
function workload(prefix: string): { userId: string; clientId: string; batches: { seq: number; op: Op }[][] }[] {
  return Array.from({ length: CLIENTS }, (_, c) => ({
    userId: `${prefix}-${c}`,
    clientId: `client${c}`,
    batches: Array.from({ length: PUSHES }, (_, p) =>
      Array.from({ length: BATCH }, (_, i) => {
        const seq = p * BATCH + i + 1;
        return { seq, op: noteOp(`${prefix}-${c}`, `session-${c}`, seq, `note ${seq} of client ${c}: ${'lorem ipsum '.repeat(4)}`) };
      }),
    ),
  }));
}

async function post(url: string, body: string, token: string): Promise<Response> {
  const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
  if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
  return response;
}

/** items/s pushing the workload through the server with CLIENTS concurrent clients. */
async function serverPush(url: string, prefix: string): Promise<number> {
  const clients = await Promise.all(
    workload(prefix).map(async (client) => ({ token: await tokenFor(client.userId), bodies: client.batches.map((items) => JSON.stringify({ clientId: client.clientId, items })) })),
  );
  const start = performance.now();
  await Promise.all(
    clients.map(async ({ token, bodies }) => {
      for (const body of bodies) await (await post(`${url}/v1/push`, body, token)).arrayBuffer();
    }),
  );
  return (CLIENTS * PUSHES * BATCH) / ((performance.now() - start) / 1000);
}

/**
 * items/s pulling every user's whole log in pages of PAGE, CLIENTS clients at
 * once (each another user's device), each answer parsed and counted.
 */
async function serverPull(url: string, prefix: string): Promise<number> {
  const tokens = await Promise.all(workload(prefix).map((client) => tokenFor(client.userId)));
  let count = 0;
  const start = performance.now();
  await Promise.all(
    tokens.map(async (token) => {
      let cursor: string | null = null;
      for (;;) {
        const page = (await (await post(`${url}/v1/pull`, JSON.stringify({ cursor, limit: PAGE }), token)).json()) as { items: unknown[]; cursor: string; more: boolean };
        count += page.items.length;
        cursor = page.cursor;
        if (!page.more) break;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  if (count !== CLIENTS * PUSHES * BATCH) throw new Error(`pulled ${count} items`);
  return count / seconds;
}

/**
 * The same pull through `server.fetch` in this process, one client: the
 * server's own cost, without sockets and without parsing the items (only
 * the envelope's tail is read, as a client that streams items would).
 */
async function inProcessPull(store: ServerStore, prefix: string): Promise<number> {
  const server = createSyncServer({ store, auth: { secret: SECRET } });
  const tokens = await Promise.all(workload(prefix).map((client) => tokenFor(client.userId)));
  let count = 0;
  const start = performance.now();
  for (const token of tokens) {
    let cursor: string | null = null;
    for (;;) {
      const response = await server.fetch(new Request('http://bench/v1/pull', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ cursor, limit: PAGE }) }));
      const tail = /"cursor":("\d+"|null),"more":(true|false)}$/.exec(await response.text())!;
      cursor = JSON.parse(tail[1]!) as string | null;
      if (tail[2] === 'false') break;
    }
    // Positions of one user run 1, 2, 3… without holes: the last cursor is the user's item count.
    count += Number(cursor);
  }
  const seconds = (performance.now() - start) / 1000;
  if (count !== CLIENTS * PUSHES * BATCH) throw new Error(`pulled ${count} items`);
  return count / seconds;
}

/**
 * Runs `tabula-server` (the CLI, through tsx) in a child process on a free
 * port, as it is deployed: the server's work then does not share a thread
 * with the clients' JSON parsing. `work` gets its URL; SIGTERM stops it.
 */
async function withServer<T>(args: readonly string[], work: (url: string) => Promise<T>): Promise<T> {
  const cli = fileURLToPath(new URL('../src/server/cli.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', cli, '--port', '0', ...args], {
    env: { ...process.env, TABULA_JWT_SECRET: SECRET },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = / listening on (\S+)/.exec(line);
      if (match) resolve(match[1]!);
    });
    void exited.then(() => reject(new Error(`tabula-server ${args.join(' ')} exited before listening`)));
  });
  try {
    return await work(url);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

// --- SQLite ---------------------------------------------------------------
{
  const file = path.join(dir, 'server.db');
  await withServer(['--db', file], async (url) => {
    await serverPush(url, 'warmup');
    // A second connection to the server's file, for the in-process row (WAL lets it read beside the server).
    const store = sqliteStore(file);
    const [push, pull, local, rawPush, rawPull]: [number[], number[], number[], number[], number[]] = [[], [], [], [], []];
    for (let round = 0; round < ROUNDS; round++) {
      push.push(await serverPush(url, `sqlite${round}`));
      pull.push(await serverPull(url, `sqlite${round}`));
      local.push(await inProcessPull(store, `sqlite${round}`));
      const raw = rawSqlite(path.join(dir, `raw${round}.db`));
      rawPush.push(raw.push);
      rawPull.push(raw.pull);
    }
    await store.close();
    const rp = best(rawPush);
    const rq = best(rawPull);
    rows.push({ case: `SQLite push (${CLIENTS} users' clients × ${PUSHES} pushes of ${BATCH})`, unit: 'items/s', tabula: Math.round(best(push)), baseline: Math.round(rp), ratio: best(push) / rp, note: 'baseline: prepared INSERT, one transaction per 100 rows' });
    rows.push({ case: `SQLite pull (${CLIENTS} clients, pages of ${PAGE})`, unit: 'items/s', tabula: Math.round(best(pull)), baseline: Math.round(rq), ratio: best(pull) / rq, note: 'baseline: prepared SELECT of the same pages' });
    rows.push({ case: `SQLite pull through server.fetch, no sockets`, unit: 'items/s', tabula: Math.round(best(local)), baseline: Math.round(rq), ratio: best(local) / rq, note: 'the server in this process, one client, items not parsed' });
  });
}

function rawSqlite(file: string): { push: number; pull: number } {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE items (user_id TEXT NOT NULL, position INTEGER NOT NULL, client_id TEXT, session_id TEXT NOT NULL, op TEXT, board BLOB, PRIMARY KEY (user_id, position)) WITHOUT ROWID');
  const insert = db.prepare('INSERT INTO items (user_id, position, client_id, session_id, op, board) VALUES (?, ?, ?, ?, ?, NULL)');
  const positions = new Map<string, number>();
  const batch = db.transaction((userId: string, clientId: string, items: { op: Op }[]) => {
    let position = positions.get(userId) ?? 0;
    for (const item of items) insert.run(userId, ++position, clientId, item.op.sessionId, JSON.stringify(item.op));
    positions.set(userId, position);
  });
  const clients = workload('raw');
  let start = performance.now();
  // better-sqlite3 is synchronous: "concurrent" clients interleave batch by batch.
  for (let p = 0; p < PUSHES; p++) for (const client of clients) batch(client.userId, client.clientId, client.batches[p]!);
  const push = (CLIENTS * PUSHES * BATCH) / ((performance.now() - start) / 1000);
  const select = db.prepare<[string, number, number], { position: number; op: string }>('SELECT position, client_id, session_id, op, board FROM items WHERE user_id = ? AND position > ? ORDER BY position LIMIT ?');
  start = performance.now();
  // better-sqlite3 is synchronous: one client after another is all it can do.
  for (const client of clients) {
    let after = 0;
    for (;;) {
      const page = select.all(client.userId, after, PAGE);
      if (page.length < PAGE) break;
      after = page[page.length - 1]!.position;
    }
  }
  const pull = (CLIENTS * PUSHES * BATCH) / ((performance.now() - start) / 1000);
  db.close();
  return { push, pull };
}

// --- PostgreSQL -----------------------------------------------------------
await withServer(['--postgres', postgres.url], async (url) => {
  await serverPush(url, 'warmup');
  const store = postgresStore(postgres.url);
  const [push, pull, local, rawPush, rawPull]: [number[], number[], number[], number[], number[]] = [[], [], [], [], []];
  for (let round = 0; round < ROUNDS; round++) {
    push.push(await serverPush(url, `pg${round}`));
    pull.push(await serverPull(url, `pg${round}`));
    local.push(await inProcessPull(store, `pg${round}`));
    const raw = await rawPostgres(postgres.url, `raw_items_${round}`);
    rawPush.push(raw.push);
    rawPull.push(raw.pull);
  }
  await store.close();
  const rp = best(rawPush);
  const rq = best(rawPull);
  rows.push({ case: `PostgreSQL push (${CLIENTS} users' clients × ${PUSHES} pushes of ${BATCH})`, unit: 'items/s', tabula: Math.round(best(push)), baseline: Math.round(rp), ratio: best(push) / rp, note: `baseline: pg multi-row INSERT per 100 rows, ${CLIENTS} connections` });
  rows.push({ case: `PostgreSQL pull (${CLIENTS} clients, pages of ${PAGE})`, unit: 'items/s', tabula: Math.round(best(pull)), baseline: Math.round(rq), ratio: best(pull) / rq, note: `baseline: pg SELECT of the same pages, ${CLIENTS} connections` });
  rows.push({ case: `PostgreSQL pull through server.fetch, no sockets`, unit: 'items/s', tabula: Math.round(best(local)), baseline: Math.round(rq), ratio: best(local) / rq, note: 'the server in this process, one client, items not parsed' });
});

async function rawPostgres(url: string, table: string): Promise<{ push: number; pull: number }> {
  const pool = new pg.Pool({ connectionString: url, max: CLIENTS });
  await pool.query(`CREATE TABLE ${table} (user_id text NOT NULL, position bigint NOT NULL, client_id text, session_id text NOT NULL, op text, board bytea, PRIMARY KEY (user_id, position))`);
  const clients = workload('raw');
  let start = performance.now();
  await Promise.all(
    clients.map(async (client) => {
      let position = 0;
      for (const items of client.batches) {
        const values: unknown[] = [];
        const tuples = items.map((item, i) => {
          values.push(client.userId, ++position, client.clientId, item.op.sessionId, JSON.stringify(item.op));
          const k = i * 5;
          return `($${k + 1}, $${k + 2}, $${k + 3}, $${k + 4}, $${k + 5})`;
        });
        await pool.query(`INSERT INTO ${table} (user_id, position, client_id, session_id, op) VALUES ${tuples.join(', ')}`, values);
      }
    }),
  );
  const push = (CLIENTS * PUSHES * BATCH) / ((performance.now() - start) / 1000);
  start = performance.now();
  await Promise.all(
    clients.map(async (client) => {
      let after = 0;
      for (;;) {
        const page = await pool.query<{ position: string }>(`SELECT position, client_id, session_id, op, board FROM ${table} WHERE user_id = $1 AND position > $2 ORDER BY position LIMIT $3`, [client.userId, after, PAGE]);
        if (page.rows.length < PAGE) break;
        after = Number(page.rows[page.rows.length - 1]!.position);
      }
    }),
  );
  const pull = (CLIENTS * PUSHES * BATCH) / ((performance.now() - start) / 1000);
  await pool.end();
  return { push, pull };
}

// --- Poke latency ---------------------------------------------------------
/**
 * One client pushes to `pushUrl` while another listens on `listenUrl`:
 * per push, ms from sending it to the poke arriving, and to the push's answer.
 */
async function pokeLatency(pushUrl: string, listenUrl: string, userId: string): Promise<{ poke: number[]; ack: number[] }> {
  const token = await tokenFor(userId);
  const events = sseReader(await fetch(`${listenUrl}/v1/events`, { headers: { authorization: `Bearer ${token}` } }));
  await events.next();
  const poke: number[] = [];
  const ack: number[] = [];
  for (let i = 1; i <= POKES; i++) {
    const body = JSON.stringify({ clientId: 'pusher', items: [{ seq: i, op: noteOp(userId, 's', i) }] });
    const start = performance.now();
    const poked = events.next().then(() => performance.now() - start);
    await (await post(`${pushUrl}/v1/push`, body, token)).arrayBuffer();
    ack.push(performance.now() - start);
    poke.push(await poked);
  }
  await events.close();
  return { poke, ack };
}

function latencyRows(name: string, samples: { poke: number[]; ack: number[] }): void {
  const poke = [...samples.poke].sort((a, b) => a - b);
  const ack = [...samples.ack].sort((a, b) => a - b);
  for (const [label, q] of [['median', 0.5], ['p95', 0.95]] as const) {
    rows.push({ case: `poke latency, ${name} (${label})`, unit: 'ms', tabula: quantile(poke, q), baseline: quantile(ack, q), ratio: quantile(poke, q) / quantile(ack, q), note: 'push sent → poke received; baseline: push sent → push answered' });
  }
}

await withServer(['--db', path.join(dir, 'poke.db')], async (url) => latencyRows('one SQLite instance', await pokeLatency(url, url, 'poke-sqlite')));
await withServer(['--postgres', postgres.url], async (url1) => {
  latencyRows('one PostgreSQL instance', await pokeLatency(url1, url1, 'poke-pg-1'));
  await withServer(['--postgres', postgres.url], async (url2) => latencyRows('across two PostgreSQL instances', await pokeLatency(url1, url2, 'poke-pg-2')));
});

await postgres.stop();
rmSync(dir, { recursive: true, force: true });

report({
  name: 'server',
  title: `Sync server over HTTP (tabula-server in its own process; ${CLIENTS} concurrent Node fetch clients, 127.0.0.1)`,
  baseline: 'the same rows inserted / selected with the raw driver in the same run (better-sqlite3 prepared statement in one transaction per 100 rows; pg multi-row INSERT), and for pokes the push round trip',
  rows,
  goals: ['push and pull throughput ≥ 0.5× the raw driver (best of 3 rounds each, measured alternately)'],
});
