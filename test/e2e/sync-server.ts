/**
 * A real sync server process for the sync e2e tests and the sync benchmark:
 * `tabula-server` (src/server/cli.ts through tsx) on a SQLite file in a temp
 * directory, on a fixed port so that a client keeps its URL across a crash
 * and restart. `kill()` is SIGKILL: no shutdown code runs, as in a crash.
 * Tokens are HS256 dev JWTs signed here with the server's secret.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';

const root = fileURLToPath(new URL('../../', import.meta.url));
const SECRET = 'tabula-e2e-secret-0123456789-abcdefgh';

/** A signed HS256 token for `userId`; `expiresInS` may be negative for one that has already expired. */
export async function tokenFor(userId: string, expiresInS = 3600): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(userId)
    .setIssuedAt(now - (expiresInS < 0 ? 2 * -expiresInS : 0))
    .setExpirationTime(now + expiresInS)
    .sign(new TextEncoder().encode(SECRET));
}

export interface ServerProcess {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** The SQLite file the server writes. */
  readonly dbPath: string;
  /** Starts the server (again) on the same port and file; resolves once it listens. */
  start(): Promise<void>;
  /** SIGKILLs the process and resolves once it has exited. */
  kill(): Promise<void>;
  /** Kills the server and removes its directory. */
  dispose(): Promise<void>;
}

/** A server process on `port` allowing pages of `origin` (CORS). Call `start()`. */
export function serverProcess(options: { port: number; origin: string }): ServerProcess {
  const dir = mkdtempSync(join(tmpdir(), 'tabula-sync-e2e-'));
  const dbPath = join(dir, 'server.db');
  let child: ChildProcess | null = null;

  const kill = async (): Promise<void> => {
    const running = child;
    child = null;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGKILL');
    await exited;
  };

  return {
    url: `http://127.0.0.1:${options.port}`,
    dbPath,
    async start() {
      if (child) throw new Error('the sync server is already running');
      const started = spawn(
        process.execPath,
        ['--import', 'tsx', join(root, 'src/server/cli.ts'), '--port', String(options.port), '--db', dbPath, '--cors', options.origin],
        { cwd: root, env: { ...process.env, TABULA_JWT_SECRET: SECRET }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child = started;
      let output = '';
      await new Promise<void>((resolve, reject) => {
        const onData = (chunk: Buffer): void => {
          output += chunk.toString();
          if (output.includes('listening on')) resolve();
        };
        started.stdout?.on('data', onData);
        started.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
        started.once('exit', (code, signal) => reject(new Error(`tabula-server exited (${code ?? signal}) before listening:\n${output}`)));
      });
    },
    kill,
    async dispose() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Every item the server holds for the token's user, through the public pull endpoint. */
export async function pullAll(url: string, token: string): Promise<({ clientId: string } & ({ op: { id: string; kind: string } } | { board: unknown }))[]> {
  const items: ({ clientId: string } & ({ op: { id: string; kind: string } } | { board: unknown }))[] = [];
  let cursor: string | null = null;
  for (;;) {
    const response = await fetch(`${url}/v1/pull`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ cursor }),
    });
    if (!response.ok) throw new Error(`pull failed: HTTP ${response.status} ${await response.text()}`);
    const page = (await response.json()) as { items: typeof items; cursor: string | null; more: boolean };
    items.push(...page.items);
    cursor = page.cursor;
    if (!page.more) return items;
  }
}
