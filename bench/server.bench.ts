/**
 * The sync server as it is deployed: the `tabula-server` CLI in a process of
 * its own, over real HTTP, with CLIENTS concurrent clients in this process.
 * Push and pull throughput on SQLite and on PostgreSQL, each beside the same
 * rows written and read with the raw driver in this process in the same run,
 * poke latency on one instance and across two PostgreSQL instances, and the
 * server's check of a board update at the size limit beside Y.decodeUpdate
 * of the same bytes.
 * Run with `npm run bench server` (or `npx tsx bench/server.bench.ts`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import * as Y from 'yjs';
import { findBoardUpdateProblem } from '../src/core/board-update/index.js';
import type { Op } from '../src/core/index.js';
import { createSyncServer, postgresStore, sqliteStore, type ServerStore } from '../src/server/index.js';
import { startPostgres } from '../test/server/embedded-postgres.js';
import { SECRET, noteOp, sseReader, tokenFor } from '../test/server/helpers.js';
import { DEFAULT_SYNC_LIMITS, PullResponseSchema } from '../src/sync/index.js';
import { quantile } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const CLIENTS = 4;
const PUSHES = 25;
const BATCH = 100;
const PAGE = 1000;
// A pull of the whole workload takes tens of ms: each pull figure times this many passes over it,
// so that one descheduling of a process on the shared machine does not make the figure.
const PULL_PASSES = 5;
const PULLED = PULL_PASSES * CLIENTS * PUSHES * BATCH;
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
type Workload = { userId: string; clientId: string; batches: { seq: number; op: Op }[][] }[];
const workloads = new Map<string, Workload>();
function workload(prefix: string): Workload {
  let clients = workloads.get(prefix);
  if (!clients) workloads.set(prefix, (clients = generate(prefix)));
  return clients;
}
function generate(prefix: string): Workload {
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

// The clients are plain node:http requests on keep-alive connections: a load generator should cost
// little next to the server it measures (fetch, undici, takes about a third more CPU per page).
const agent = new http.Agent({ keepAlive: true });

/** POSTs `body` with the token; resolves with the answer's text, rejects on a status other than 200. */
function post(url: string, body: string, token: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (response.statusCode === 200) resolve(text);
          else reject(new Error(`${url}: ${response.statusCode} ${text}`));
        });
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** items/s pushing the workload through the server with CLIENTS concurrent clients. */
async function serverPush(url: string, prefix: string): Promise<number> {
  const clients = await Promise.all(
    workload(prefix).map(async (client) => ({ token: await tokenFor(client.userId), bodies: client.batches.map((items) => JSON.stringify({ clientId: client.clientId, items })) })),
  );
  const start = performance.now();
  await Promise.all(
    clients.map(async ({ token, bodies }) => {
      for (const body of bodies) await post(`${url}/v1/push`, body, token);
    }),
  );
  return (CLIENTS * PUSHES * BATCH) / ((performance.now() - start) / 1000);
}

/** What a pull answer ends with: the cursor and `more`. */
const TAIL = /"cursor":("\d+"|null),"more":(true|false)}$/;
/** Every item of a page starts so; inside a JSON string the quotes would be escaped, so the count is exact. */
const ITEM = '{"clientId":';

function countItems(page: string): number {
  let count = 0;
  for (let at = page.indexOf(ITEM); at >= 0; at = page.indexOf(ITEM, at + ITEM.length)) count++;
  return count;
}

/**
 * items/s pulling every user's whole log in pages of PAGE, CLIENTS clients at
 * once (each another user's device). Like the raw driver, which hands back
 * each op as JSON text, the clients take each page as text (every byte read,
 * items counted) unless `parse`: then they `JSON.parse` every page, the
 * clients' own cost, paid on this process's one thread.
 */
async function serverPull(url: string, prefix: string, parse: boolean): Promise<number> {
  const tokens = await Promise.all(workload(prefix).map((client) => tokenFor(client.userId)));
  let count = 0;
  const start = performance.now();
  await Promise.all(
    tokens.map(async (token) => {
      for (let pass = 0; pass < PULL_PASSES; pass++) {
        let cursor: string | null = null;
        for (;;) {
          const text = await post(`${url}/v1/pull`, JSON.stringify({ cursor, limit: PAGE }), token);
          let more: boolean;
          if (parse) {
            const page = JSON.parse(text) as { items: unknown[]; cursor: string; more: boolean };
            count += page.items.length;
            cursor = page.cursor;
            more = page.more;
          } else {
            const tail = TAIL.exec(text)!;
            count += countItems(text);
            cursor = JSON.parse(tail[1]!) as string | null;
            more = tail[2] === 'true';
          }
          if (!more) break;
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  if (count !== PULLED) throw new Error(`pulled ${count} items`);
  return count / seconds;
}

/** Pulls every user's log once, checking every page against the protocol schema: the items the timed pulls count are real. */
async function checkPull(url: string, prefix: string): Promise<void> {
  for (const client of workload(prefix)) {
    const token = await tokenFor(client.userId);
    const ids: string[] = [];
    let cursor: string | null = null;
    for (;;) {
      const page = PullResponseSchema.parse(JSON.parse(await post(`${url}/v1/pull`, JSON.stringify({ cursor, limit: PAGE }), token)));
      for (const item of page.items) if ('op' in item) ids.push(item.op.id);
      cursor = page.cursor;
      if (!page.more) break;
    }
    const pushed = client.batches.flat().map((item) => item.op.id);
    if (ids.join() !== pushed.join()) throw new Error(`${client.userId}: the pull does not return the pushed ops in order`);
  }
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
  for (let pass = 0; pass < PULL_PASSES; pass++) {
    for (const token of tokens) {
      let cursor: string | null = null;
      for (;;) {
        const response = await server.fetch(new Request('http://bench/v1/pull', { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ cursor, limit: PAGE }) }));
        const tail = TAIL.exec(await response.text())!;
        cursor = JSON.parse(tail[1]!) as string | null;
        if (tail[2] === 'false') break;
      }
      // Positions of one user run 1, 2, 3… without holes: the last cursor is the user's item count.
      count += Number(cursor);
    }
  }
  const seconds = (performance.now() - start) / 1000;
  if (count !== PULLED) throw new Error(`pulled ${count} items`);
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

/**
 * Rounds of: the server's push, its pull (clients reading text, then parsing),
 * the in-process pull, then the raw driver's push and pull; each figure the
 * best of ROUNDS, rows added to the report under `name`.
 */
async function throughput(name: string, url: string, store: ServerStore, raw: (round: number) => Promise<{ push: number; pull: number }>, notes: { push: string; pull: string }): Promise<void> {
  await serverPush(url, `${name}-warmup`);
  const figures = { push: [] as number[], pull: [] as number[], parsed: [] as number[], local: [] as number[], rawPush: [] as number[], rawPull: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const prefix = `${name}-${round}`;
    figures.push.push(await serverPush(url, prefix));
    if (round === 0) await checkPull(url, prefix);
    figures.pull.push(await serverPull(url, prefix, false));
    figures.parsed.push(await serverPull(url, prefix, true));
    figures.local.push(await inProcessPull(store, prefix));
    const driver = await raw(round);
    figures.rawPush.push(driver.push);
    figures.rawPull.push(driver.pull);
  }
  const rp = best(figures.rawPush);
  const rq = best(figures.rawPull);
  const row = (label: string, values: number[], base: number, note: string): BenchRow => ({ case: `${name} ${label}`, unit: 'items/s', tabula: Math.round(best(values)), baseline: Math.round(base), ratio: best(values) / base, note });
  rows.push(row(`push (${CLIENTS} users' clients × ${PUSHES} pushes of ${BATCH})`, figures.push, rp, notes.push));
  rows.push(row(`pull (${CLIENTS} clients, pages of ${PAGE})`, figures.pull, rq, notes.pull));
  rows.push(row(`pull, clients JSON.parse every page`, figures.parsed, rq, 'the clients parse in this process, on one thread: their cost, not the server\'s'));
  rows.push(row(`pull through server.fetch, no sockets`, figures.local, rq, 'the server in this process, one client, items not parsed'));
}

// --- SQLite ---------------------------------------------------------------
{
  const file = path.join(dir, 'server.db');
  await withServer(['--db', file], async (url) => {
    // A second connection to the server's file, for the in-process row (WAL lets it read beside the server).
    const store = sqliteStore(file);
    await throughput('SQLite', url, store, async (round) => rawSqlite(path.join(dir, `raw${round}.db`)), {
      push: 'baseline: prepared INSERT, one transaction per 100 rows',
      pull: 'baseline: prepared SELECT of the same pages',
    });
    await store.close();
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
  for (let pass = 0; pass < PULL_PASSES; pass++) {
    for (const client of clients) {
      let after = 0;
      for (;;) {
        const page = select.all(client.userId, after, PAGE);
        if (page.length < PAGE) break;
        after = page[page.length - 1]!.position;
      }
    }
  }
  const pull = PULLED / ((performance.now() - start) / 1000);
  db.close();
  return { push, pull };
}

// --- PostgreSQL -----------------------------------------------------------
await withServer(['--postgres', postgres.url], async (url) => {
  const store = postgresStore(postgres.url);
  await throughput('PostgreSQL', url, store, (round) => rawPostgres(postgres.url, `raw_items_${round}`), {
    push: `baseline: pg multi-row INSERT per 100 rows, ${CLIENTS} connections`,
    pull: `baseline: pg SELECT of the same pages, ${CLIENTS} connections`,
  });
  await store.close();
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
      for (let pass = 0; pass < PULL_PASSES; pass++) {
        let after = 0;
        for (;;) {
          const page = await pool.query<{ position: string }>(`SELECT position, client_id, session_id, op, board FROM ${table} WHERE user_id = $1 AND position > $2 ORDER BY position LIMIT $3`, [client.userId, after, PAGE]);
          if (page.rows.length < PAGE) break;
          after = Number(page.rows[page.rows.length - 1]!.position);
        }
      }
    }),
  );
  const pull = PULLED / ((performance.now() - start) / 1000);
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
    await post(`${pushUrl}/v1/push`, body, token);
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

// --- Board update check ---------------------------------------------------
/**
 * The board rule a push's board update passes (findBoardUpdateProblem, what the server runs on every
 * one) beside Y.decodeUpdate of the same bytes, the check it replaced: the median of CHECK_RUNS runs of
 * each, alternated, on three updates just under maxUpdateBytes.
 */
const CHECK_RUNS = 41;
const limit = DEFAULT_SYNC_LIMITS.maxUpdateBytes;
const rules = { maxBytes: limit, maxStructs: DEFAULT_SYNC_LIMITS.maxUpdateStructs };

/** The largest update `grow(doc, round)` makes, round after round, that stays under the limit. */
function underLimit(grow: (doc: Y.Doc, round: number) => void): Uint8Array {
  const doc = new Y.Doc();
  let last = Y.encodeStateAsUpdate(doc);
  for (let round = 0; ; round++) {
    grow(doc, round);
    const next = Y.encodeStateAsUpdate(doc);
    if (next.length > limit) return last;
    last = next;
  }
}
const boardUpdates: [string, Uint8Array][] = [
  [
    'new keys, JSON values',
    underLimit((doc, round) =>
      doc.transact(() => {
        for (let k = 0; k < 200; k++) doc.getMap('blackboard').set(`key-${round}-${k}`, { title: `item ${k}`, tags: ['a', 'b'], n: k, done: k % 2 === 0 });
      }),
    ),
  ],
  [
    '500 keys overwritten, each through its origin',
    underLimit((doc, round) =>
      doc.transact(() => {
        for (let k = 0; k < 500; k++) doc.getMap('blackboard').set(`key-${k}`, { round, text: `value ${round}` });
      }),
    ),
  ],
  [
    'a Y.Text typed at random places',
    underLimit((doc) => {
      const text = doc.getText('notes');
      for (let i = 0; i < 500; i++) text.insert(Math.floor(Math.random() * (text.length + 1)), 'ab');
    }),
  ],
];
for (const [label, bytes] of boardUpdates) {
  const check: number[] = [];
  const decode: number[] = [];
  for (let run = 0; run < CHECK_RUNS; run++) {
    let start = performance.now();
    if (findBoardUpdateProblem(bytes, rules) !== null) throw new Error(`the board rule refuses the ${label} update`);
    check.push(performance.now() - start);
    start = performance.now();
    Y.decodeUpdate(bytes);
    decode.push(performance.now() - start);
  }
  const median = (values: number[]): number => quantile([...values].sort((a, b) => a - b), 0.5);
  rows.push({
    case: `board update check, ${Math.round(bytes.length / 1024)} KiB: ${label}`,
    unit: 'ms',
    tabula: median(check),
    baseline: median(decode),
    ratio: median(check) / median(decode),
    note: `baseline: Y.decodeUpdate of the same bytes; ${Y.decodeUpdate(bytes).structs.length} structs`,
  });
}

report({
  name: 'server',
  title: `Sync server over HTTP (tabula-server in its own process; ${CLIENTS} concurrent node:http clients, 127.0.0.1)`,
  baseline: 'the same rows inserted / selected with the raw driver in the same run (better-sqlite3 prepared statement in one transaction per 100 rows; pg multi-row INSERT), for pokes the push round trip, and for the board update check Y.decodeUpdate of the same bytes',
  rows,
  goals: ['push and pull throughput ≥ 0.5× the raw driver (best of 3 rounds each, measured alternately)', 'board update check ≤ 2× Y.decodeUpdate of the same bytes, at the size limit'],
});
