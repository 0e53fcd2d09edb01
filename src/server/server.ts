/**
 * `createSyncServer`: the reference sync server, a Hono app over a
 * {@link ServerStore}. It owns every policy of the protocol (auth, limits,
 * validation, ownership of ops, error shapes) and keeps no state of its own
 * past open event streams, so any number of instances can share one store.
 *
 * A push is validated whole before the store sees it: a bad field, a
 * foreign op, an oversized or undecodable board update refuses the whole
 * push and stores nothing. The answer goes out only after the store has
 * committed. Error responses name the field at fault and never carry data
 * of another user.
 *
 * Every answer, errors and event streams included, carries the server's
 * clock (`X-Tabula-Time`) and its store's epoch (`X-Tabula-Epoch`), and each
 * poke the clock too: clients correct their clocks by it, and notice a store
 * that lost their data (a new epoch, or a pull cursor past the store's
 * head, answered 409). An op ordered more than `maxDriftMs` ahead of the
 * server's clock is refused like any invalid field.
 *
 * Every resource a client can make it hold is bounded: a body by
 * `maxBodyBytes` and `bodyTimeoutMs`, an event stream by its token's expiry,
 * `maxStreamQueueBytes` of unread events and `maxStreamsPerUser` streams
 * per user on this instance. The store's own work is bounded by the size
 * limits, not by a timer: a push abandoned halfway could still commit.
 *
 * This module wires the server: auth and revocation, the headers of every
 * answer, CORS, listening and closing. The policies live one to a module:
 * the limits (limits.ts), reading a body (body.ts), the push and pull
 * endpoints (routes.ts), the event stream (event-stream.ts) and error
 * answers (responses.ts).
 */
import { serve } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { cors as honoCors } from 'hono/cors';
import type { AddressInfo } from 'node:net';
import { TabulaError } from '../core/errors.js';
import { PROTOCOL_VERSION, SYNC_HEADERS, SYNC_PATHS, type HealthResponse, type SyncLimits } from '../sync/protocol.js';
import { bearerToken, createVerifier, type SyncAuth, type VerifiedToken } from './auth.js';
import { createEventStreams } from './event-stream.js';
import { limitsOf } from './limits.js';
import { errorBody, toErrorResponse } from './responses.js';
import { pullRoute, pushRoute } from './routes.js';
import type { ServerStore } from './store.js';

/** Options of {@link createSyncServer}. */
export interface SyncServerOptions {
  /** Where items live: `sqliteStore(path)` or `postgresStore(url)`. The server does not close it. */
  readonly store: ServerStore;
  /** How tokens are checked. */
  readonly auth: SyncAuth;
  /** Overrides of {@link DEFAULT_SYNC_LIMITS}. */
  readonly limits?: Partial<SyncLimits>;
  /** Allow browsers on these origins to call the server (CORS). Off by default. */
  readonly cors?: { readonly origin: string | readonly string[] };
  /** Interval of the heartbeat comments on `/v1/events`, in ms. @default 15000 */
  readonly heartbeatMs?: number;
  /**
   * Whether a token the auth setting accepted has been revoked since (a signed-out session, a blocked
   * user), asked before every request and at every heartbeat of an open event stream. True: the request
   * gets 401 `sync/unauthorized`, and the stream sends `event: expired` with `{"reason":"revoked"}` and
   * ends, so it outlives a revocation by at most `heartbeatMs`. Ask your session store, not this
   * process's memory, so every instance agrees. It runs on every request: keep it fast. A throw answers
   * the request with 500 and leaves a stream open (the next heartbeat asks again).
   */
  readonly isRevoked?: (token: string, userId: string) => boolean | Promise<boolean>;
}

/** A server bound to a port by {@link SyncServer.listen}. */
export interface ListeningServer {
  /** `http://host:port`, with the port actually bound (useful with port 0). */
  readonly url: string;
  /** Stops accepting connections, ends event streams, lets running requests finish. */
  close(): Promise<void>;
}

/** The sync server. */
export interface SyncServer {
  /** The Fetch-API handler: call it from tests or any host that speaks `Request`/`Response`. */
  fetch(request: Request): Promise<Response>;
  /** Serves over HTTP with Node. `port` 0 picks a free port. @default host '127.0.0.1' */
  listen(options: { port: number; host?: string }): Promise<ListeningServer>;
  /** Ends every event stream and stops listening. The store stays open (it is yours to close). */
  close(): Promise<void>;
}
/** Creates a sync server over `store`. Nothing listens until {@link SyncServer.listen}. */
export function createSyncServer(options: SyncServerOptions): SyncServer {
  const { store, isRevoked } = options;
  const limits = limitsOf(options.limits);
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const verify = createVerifier(options.auth);
  const listening = new Set<ListeningServer>();

  /** The request's token, checked and not revoked. */
  const authorize = async (c: Context): Promise<VerifiedToken & { readonly token: string }> => {
    const token = bearerToken(c.req.header('authorization'));
    const verified = await verify(token);
    if (isRevoked && (await isRevoked(token, verified.userId))) throw new TabulaError('sync/unauthorized', 'The token was revoked; sign in again for a new one.');
    return { ...verified, token };
  };
  const userOf = async (c: Context): Promise<string> => (await authorize(c)).userId;

  /** The store's epoch, read once: it is the store's for as long as the store is open. Read again after a failure. */
  let epoch: Promise<string> | undefined;
  const epochOf = (): Promise<string | null> => {
    const reading = (epoch ??= store.epoch());
    return reading.catch(() => {
      if (epoch === reading) epoch = undefined;
      return null;
    });
  };

  const app = new Hono();
  // Outermost: the headers go on every answer, the ones onError and notFound make included.
  app.use('*', async (c, next) => {
    await next();
    const id = await epochOf();
    c.res.headers.set(SYNC_HEADERS.time, String(Date.now()));
    if (id !== null) c.res.headers.set(SYNC_HEADERS.epoch, id);
  });
  if (options.cors) {
    app.use(
      '*',
      honoCors({
        origin: typeof options.cors.origin === 'string' ? options.cors.origin : [...options.cors.origin],
        allowHeaders: ['Authorization', 'Content-Type'],
        allowMethods: ['GET', 'POST', 'OPTIONS'],
        // A page's fetch reads only the headers listed here from another origin.
        exposeHeaders: [SYNC_HEADERS.time, SYNC_HEADERS.epoch],
        maxAge: 600,
      }),
    );
  }
  app.onError((error, c) => toErrorResponse(c, error));
  app.notFound((c) => c.json(errorBody('sync/not-found', `No endpoint ${c.req.method} ${c.req.path}; see ${Object.values(SYNC_PATHS).join(', ')}.`), 404));

  app.get(SYNC_PATHS.health, (c) => c.json({ ok: true, protocol: PROTOCOL_VERSION } satisfies HealthResponse));
  app.post(SYNC_PATHS.push, pushRoute({ store, limits, userOf }));
  app.post(SYNC_PATHS.pull, pullRoute({ store, limits, userOf }));
  const events = createEventStreams({ store, limits, heartbeatMs, isRevoked, authorize });
  app.get(SYNC_PATHS.events, (c) => events.handle(c));

  const closeStreams = (): void => events.closeAll();

  return {
    async fetch(request) {
      return app.fetch(request);
    },
    async listen({ port, host = '127.0.0.1' }) {
      const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
        const created = serve({ fetch: app.fetch, port, hostname: host }, () => resolve(created));
        created.once('error', reject);
      });
      const address = server.address() as AddressInfo;
      const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      const handle: ListeningServer = {
        url: `http://${shown}:${address.port}`,
        close: () =>
          new Promise<void>((resolve, reject) => {
            listening.delete(handle);
            closeStreams();
            server.close((error) => (error ? reject(error) : resolve()));
            // Idle keep-alive sockets would hold close() open forever; running requests still finish.
            if ('closeIdleConnections' in server) server.closeIdleConnections();
          }),
      };
      listening.add(handle);
      return handle;
    },
    async close() {
      closeStreams();
      await Promise.all([...listening].map((handle) => handle.close()));
    },
  };
}
