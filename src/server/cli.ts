#!/usr/bin/env node
/**
 * `tabula-server`: starts the reference sync server from the command line.
 * It parses flags, picks the store (SQLite file by default, PostgreSQL with
 * `--postgres`), and shuts down cleanly on SIGINT/SIGTERM: it stops
 * accepting connections, lets running requests finish, then closes the store.
 * This file is the process entry; everything it uses is in the library.
 */
import { parseArgs } from 'node:util';
import { isTabulaError } from '../core/errors.js';
import { DEFAULT_SYNC_LIMITS as LIMITS } from '../sync/protocol.js';
import { createVerifier, type SyncAuth } from './auth.js';
import { postgresStore } from './postgres-store.js';
import { createSyncServer } from './server.js';
import { sqliteStore } from './sqlite-store.js';

/** `bytes` as the help shows it: 1 MiB, 256 KiB. */
function size(bytes: number): string {
  return bytes % 1048576 === 0 ? `${bytes / 1048576} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}
const HELP = `Usage: tabula-server [options]

Runs the Tabula sync server.

Options:
  --port <n>          Port to listen on (0–65535); 0 picks a free one. (default 8787)
  --host <address>    Address to bind; 0.0.0.0 to accept from others. (default 127.0.0.1)
  --db <path>         SQLite file, created if missing.             (default ./tabula.db)
  --postgres <url>    Use PostgreSQL instead of SQLite, e.g. postgres://user:pw@host/db.
                      Run several servers on one database behind a load balancer.
  --jwks-url <url>    Verify tokens with your identity provider's JSON Web Key Set.
  --audience <aud>    With --jwks-url, required: the "aud" of your provider's tokens for this app.
  --issuer <iss>      With --jwks-url: the required "iss" claim.
  --cors <origin>     Allow browser pages from this origin (repeat for several).
  -h, --help          Show this help.

Authentication: set TABULA_JWT_SECRET to 32 or more random bytes (openssl rand -base64 32)
to accept HS256 tokens signed with it, or pass --jwks-url and --audience. Tokens must carry
"exp"; the user is their "sub" claim.

Limits (createSyncServer({ limits }) sets others from code):
  request body        ${size(LIMITS.maxBodyBytes)}, in at most ${LIMITS.bodyTimeoutMs / 1000} s (else 408); a push ${LIMITS.maxPushItems} items, a board update ${size(LIMITS.maxUpdateBytes)}
  pull                ${LIMITS.maxPullItems} items a page
  event streams       ${LIMITS.maxStreamsPerUser} per user on this server (else 429); a stream ends when its token
                      expires, or when ${size(LIMITS.maxStreamQueueBytes)} of events wait for a reader that is not reading

Stop with Ctrl-C or SIGTERM: running requests finish before the store closes.
`;

function fail(message: string): never {
  console.error(`tabula-server: ${message}\nRun tabula-server --help for the options.`);
  process.exit(2);
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: 'string', default: '8787' },
        host: { type: 'string', default: '127.0.0.1' },
        db: { type: 'string', default: './tabula.db' },
        postgres: { type: 'string' },
        'jwks-url': { type: 'string' },
        issuer: { type: 'string' },
        audience: { type: 'string' },
        cors: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    }));
  } catch (error) {
    fail((error as Error).message);
  }
  if (values.help) {
    process.stdout.write(HELP);
    return;
  }
  // Number() would read '', ' 80', '0x50' and '1e3' as ports, and '' as 0, a random one.
  if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65535) fail(`--port must be a decimal port number from 0 to 65535, got "${values.port}".`);
  const port = Number(values.port);

  let auth: SyncAuth;
  const secret = process.env.TABULA_JWT_SECRET;
  const jwksUrl = values['jwks-url'];
  if (jwksUrl === undefined) {
    // Left to stand, they would look like a check the server does not make.
    for (const flag of ['issuer', 'audience'] as const) {
      if (values[flag] !== undefined) fail(`--${flag} applies only with --jwks-url (it checks your identity provider's tokens); pass --jwks-url too, or leave --${flag} out.`);
    }
  }
  if (jwksUrl !== undefined) {
    if (!values.audience) fail('--audience is required with --jwks-url: without it the server would accept tokens your identity provider minted for any of its apps.');
    auth = { jwksUrl, audience: values.audience, ...(values.issuer ? { issuer: values.issuer } : {}) };
  } else if (secret) {
    auth = { secret };
  } else {
    fail('no way to check tokens: set TABULA_JWT_SECRET or pass --jwks-url.');
  }
  // Checked before the store opens: a refused secret must not leave a database file behind.
  try {
    createVerifier(auth);
  } catch (error) {
    if (isTabulaError(error, 'argument/invalid')) fail(error.message.replace('auth.secret', 'TABULA_JWT_SECRET'));
    throw error;
  }

  const store = values.postgres !== undefined ? postgresStore(values.postgres) : sqliteStore(values.db);
  const server = createSyncServer({ store, auth, ...(values.cors ? { cors: { origin: values.cors } } : {}) });
  // Touch the store before announcing: a bad URL or file fails here, not on the first request.
  await store.head('');
  const listening = await server.listen({ port, host: values.host });
  const where = values.postgres !== undefined ? 'PostgreSQL' : `SQLite ${values.db}`;
  console.log(`tabula-server listening on ${listening.url} (${where})`);

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) {
      console.error(`tabula-server: ${signal} again, exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    console.log(`tabula-server: ${signal}, finishing running requests`);
    void server
      .close()
      .then(() => store.close())
      .then(() => console.log('tabula-server: stopped'))
      .catch((error: unknown) => {
        console.error('tabula-server: error while stopping', error);
        process.exitCode = 1;
      });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(`tabula-server: ${isTabulaError(error) ? error.message : String((error as Error)?.stack ?? error)}`);
  process.exit(1);
});
