/**
 * The demo's backend, as a Vite plugin: `npm run demo` (and `vite preview`)
 * serves the reference sync server under `/sync` on SQLite, and a demo-only
 * sign-in under `/demo-api` that issues development HS256 JWTs for any user
 * name. Nothing here is for production: the secret is generated into the
 * git-ignored data folder and anyone who can reach the port can sign in as
 * anyone. A static build has neither path, and the app then runs offline
 * with sync off.
 *
 * The store opens on the first request, not when Vite loads its config, so
 * Vitest (which loads the same config) never opens a database.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join, resolve } from 'node:path';
import { getRequestListener } from '@hono/node-server';
import { SignJWT } from 'jose';
import type { Plugin } from 'vite';
import { createSyncServer, sqliteStore, type ServerStore, type SyncServer } from '../src/server/index.js';

/** Where the demo mounts the sync server on its own origin. */
export const SYNC_PREFIX = '/sync';
/** Where the demo's sign-in lives. */
export const DEMO_API_PREFIX = '/demo-api';
/** Lowercase letters, digits, `-` and `_`: safe in a database name and a JWT `sub`. */
const USER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const TOKEN_LIFETIME = '1h';

/** Options of {@link demoServer}. */
export interface DemoServerOptions {
  /** Folder of the SQLite file and the development secret. @default process.env.TABULA_DEMO_DATA ?? '.demo-data' */
  readonly dataDir?: string;
}

type Next = (error?: unknown) => void;

interface Backend {
  readonly store: ServerStore;
  readonly server: SyncServer;
  readonly secret: Uint8Array;
  readonly handleSync: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

function loadSecret(dataDir: string): Uint8Array {
  const file = join(dataDir, 'dev-jwt-secret');
  try {
    return new Uint8Array(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64'));
  } catch {
    // First run: a fresh secret, kept so tokens survive a restart of `npm run demo`.
    const secret = randomBytes(32);
    writeFileSync(file, secret.toString('base64'), { mode: 0o600 });
    return new Uint8Array(secret);
  }
}

function openBackend(dataDir: string): Backend {
  mkdirSync(dataDir, { recursive: true });
  const secret = loadSecret(dataDir);
  const store = sqliteStore(join(dataDir, 'sync.db'));
  const server = createSyncServer({ store, auth: { secret } });
  const listener = getRequestListener((request) => server.fetch(request));
  return { store, server, secret, handleSync: async (req, res) => listener(req, res) };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > 4096) throw new Error('The sign-in body is over 4 KiB.');
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
}

async function signIn(backend: Backend, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body: unknown;
  try {
    body = await readBody(req);
  } catch {
    sendJson(res, 400, { error: { message: 'Send a JSON body {"user": "<name>"}.' } });
    return;
  }
  const user = typeof body === 'object' && body !== null && 'user' in body ? body.user : undefined;
  if (typeof user !== 'string' || !USER_NAME.test(user)) {
    sendJson(res, 400, { error: { message: 'Pick a user name of 1 to 32 lowercase letters, digits, "-" or "_", starting with a letter or digit.' } });
    return;
  }
  const token = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(user).setIssuedAt().setExpirationTime(TOKEN_LIFETIME).sign(backend.secret);
  sendJson(res, 200, { user, token });
}

/** The Vite plugin: mounts `/sync/*` and `/demo-api/*` on the dev and preview servers. */
export function demoServer(options: DemoServerOptions = {}): Plugin {
  const dataDir = resolve(options.dataDir ?? process.env.TABULA_DEMO_DATA ?? '.demo-data');
  let backend: Backend | null = null;
  const ensure = (): Backend => (backend ??= openBackend(dataDir));

  const middleware = (req: IncomingMessage, res: ServerResponse, next: Next): void => {
    const url = req.url ?? '/';
    if (url === SYNC_PREFIX || url.startsWith(`${SYNC_PREFIX}/`)) {
      req.url = url.slice(SYNC_PREFIX.length) || '/';
      ensure().handleSync(req, res).catch(next);
      return;
    }
    if (url === `${DEMO_API_PREFIX}/config`) {
      sendJson(res, 200, { sync: { url: SYNC_PREFIX } });
      return;
    }
    if (url === `${DEMO_API_PREFIX}/sign-in` && req.method === 'POST') {
      signIn(ensure(), req, res).catch(next);
      return;
    }
    next();
  };

  const closeBackend = async (): Promise<void> => {
    const open = backend;
    backend = null;
    if (!open) return;
    await open.server.close();
    await open.store.close();
  };

  return {
    name: 'tabula-demo-server',
    configureServer(server) {
      server.middlewares.use(middleware);
      server.httpServer?.once('listening', () => server.config.logger.info(`  ➜  Sync:    ${SYNC_PREFIX} on SQLite in ${dataDir} (demo sign-in at ${DEMO_API_PREFIX}/sign-in)`));
      server.httpServer?.once('close', () => void closeBackend());
    },
    configurePreviewServer(server) {
      server.middlewares.use(middleware);
      server.httpServer.once('close', () => void closeBackend());
    },
  };
}
