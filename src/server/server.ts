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
 */
import { serve } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { cors as honoCors } from 'hono/cors';
import type { AddressInfo } from 'node:net';
import { TabulaError, isTabulaError } from '../core/errors.js';
import {
  DEFAULT_SYNC_LIMITS,
  PROTOCOL_VERSION,
  PullRequestSchema,
  PushRequestSchema,
  SYNC_HEADERS,
  SYNC_PATHS,
  findDriftedOrder,
  parseWire,
  type ErrorResponse,
  type ExpiredEvent,
  type HealthResponse,
  type PushResponse,
  type SyncErrorCode,
  type SyncLimits,
} from '../sync/protocol.js';
import { bearerToken, createVerifier, type SyncAuth, type VerifiedToken } from './auth.js';
import { decodeBoardUpdate } from './board.js';
import type { ServerStore, StorePokeItems, StorePushItem } from './store.js';

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

const STATUS: Record<SyncErrorCode, 400 | 401 | 403 | 404 | 408 | 409 | 413 | 429 | 500> = {
  'schema/invalid': 400,
  'sync/unauthorized': 401,
  'sync/forbidden': 403,
  'sync/not-found': 404,
  'sync/timeout': 408,
  'sync/gap': 409,
  'sync/too-large': 413,
  'sync/rate-limited': 429,
  'storage/failed': 500,
};

/** The longest delay a timer honours (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `fn` at `timeMs` (ms since the epoch), however far ahead; returns the canceller. */
function at(timeMs: number, fn: () => void): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (): void => {
    const wait = timeMs - Date.now();
    if (wait <= 0) return fn();
    timer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
  };
  arm();
  return () => clearTimeout(timer);
}

const LIMIT_NAMES = ['maxBodyBytes', 'maxPushItems', 'maxUpdateBytes', 'maxPullItems', 'bodyTimeoutMs', 'maxStreamQueueBytes', 'maxStreamsPerUser', 'maxDriftMs'] as const;

/** The limits with `overrides` applied; throws `argument/invalid` naming a limit that is not a positive integer. */
function limitsOf(overrides: Partial<SyncLimits> = {}): SyncLimits {
  const limits: SyncLimits = { ...DEFAULT_SYNC_LIMITS, ...overrides };
  for (const name of LIMIT_NAMES) {
    const value: unknown = limits[name];
    // A NaN or 0 limit would refuse everything, or (as a timer's delay) nothing at all.
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || (name === 'bodyTimeoutMs' && value > MAX_TIMER_MS)) {
      throw new TabulaError('argument/invalid', `limits.${name} must be a positive integer${name === 'bodyTimeoutMs' ? ` of ms up to ${MAX_TIMER_MS}` : ''}, got ${String(value)}; leave it out for ${DEFAULT_SYNC_LIMITS[name]}.`);
    }
  }
  return limits;
}

function errorBody(code: SyncErrorCode, message: string, extra: { lastSeq?: number; head?: number } = {}): ErrorResponse {
  return { error: { code, message, ...extra } };
}

function toErrorResponse(c: Context, error: unknown): Response {
  if (isTabulaError(error) && error.code in STATUS) {
    const code = error.code as SyncErrorCode;
    const headers: Record<string, string> = code === 'sync/unauthorized' ? { 'WWW-Authenticate': 'Bearer' } : {};
    return c.json(errorBody(code, error.message), STATUS[code], headers);
  }
  if (isTabulaError(error, 'storage/closed')) return c.json(errorBody('storage/failed', 'The server is shutting down; retry.'), 503);
  console.error('tabula-server: request failed', error);
  return c.json(errorBody('storage/failed', 'The server could not complete the request; retry later.'), 500);
}

/**
 * Reads a body of at most `maxBytes` within `timeoutMs` without buffering
 * more than that. A body with `Content-Length` is read in one go (the HTTP
 * parser delivers no more than it declares; @hono/node-server then reads it
 * straight from the socket, without a web stream) and its size checked
 * again; a chunked body is counted as it comes and cut off past the limit.
 * A body still arriving at the deadline is refused with 408: it would hold
 * a connection and up to `maxBytes` of memory for as long as its sender
 * likes. Either way nothing reaches the store.
 */
async function readBody(request: Request, maxBytes: number, timeoutMs: number): Promise<unknown> {
  const tooLarge = (): TabulaError => new TabulaError('sync/too-large', `The request body is over the ${maxBytes}-byte limit; split the push.`);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TabulaError('sync/timeout', `The request body did not arrive within ${timeoutMs} ms; nothing of it was stored. Retry (a smaller push on a slow connection).`)),
      timeoutMs,
    );
  });
  const declared = request.headers.get('content-length');
  let bytes: Buffer;
  try {
    if (declared !== null && /^\d+$/.test(declared)) {
      if (Number(declared) > maxBytes) throw tooLarge();
      const reading = request.arrayBuffer();
      // Past the deadline nobody awaits it; the host ends it with the connection.
      reading.catch(() => undefined);
      bytes = Buffer.from(await Promise.race([reading, deadline]));
      if (bytes.byteLength > maxBytes) throw tooLarge();
    } else {
      const chunks: Uint8Array[] = [];
      let size = 0;
      if (request.body) {
        const reader = request.body.getReader();
        for (;;) {
          let chunk: ReadableStreamReadResult<Uint8Array>;
          try {
            chunk = await Promise.race([reader.read(), deadline]);
          } catch (error) {
            await reader.cancel().catch(() => undefined);
            throw error;
          }
          const { done, value } = chunk;
          if (done) break;
          size += value.byteLength;
          if (size > maxBytes) {
            await reader.cancel();
            throw tooLarge();
          }
          chunks.push(value);
        }
      }
      bytes = Buffer.concat(chunks);
    }
  } finally {
    clearTimeout(timer);
  }
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new TabulaError('schema/invalid', 'The request body is not JSON; send `Content-Type: application/json` with a JSON object.');
  }
}

/** Creates a sync server over `store`. Nothing listens until {@link SyncServer.listen}. */
export function createSyncServer(options: SyncServerOptions): SyncServer {
  const { store, isRevoked } = options;
  const limits = limitsOf(options.limits);
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const verify = createVerifier(options.auth);
  const streams = new Set<() => void>();
  /** Open event streams per user, for `maxStreamsPerUser`. */
  const streamsOfUser = new Map<string, number>();
  const listening = new Set<ListeningServer>();
  const readJson = (request: Request, maxBytes: number): Promise<unknown> => readBody(request, maxBytes, limits.bodyTimeoutMs);

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

  app.post(SYNC_PATHS.push, async (c) => {
    const userId = await userOf(c);
    const body = await readJson(c.req.raw, limits.maxBodyBytes);
    const count = (body as { items?: unknown } | null)?.items;
    if (Array.isArray(count) && count.length > limits.maxPushItems) {
      throw new TabulaError('sync/too-large', `The push has ${count.length} items, over the limit of ${limits.maxPushItems}; split it.`);
    }
    const push = parseWire(PushRequestSchema, body, 'The push body');
    const items: StorePushItem[] = [];
    const now = Date.now();
    for (const [i, item] of push.items.entries()) {
      if ('op' in item) {
        // Refuse the whole push: storing the rest would leave the client unable to tell what landed.
        if (item.op.userId !== userId) {
          throw new TabulaError('sync/forbidden', `items[${i}].op.userId is not the user of the token; a client pushes only its own user's ops. Nothing of this push was stored.`);
        }
        const drifted = findDriftedOrder(item.op, now, limits.maxDriftMs);
        if (drifted !== null) {
          throw new TabulaError(
            'schema/invalid',
            `items[${i}].op.${drifted} is ordered more than ${limits.maxDriftMs} ms ahead of the server's clock (${new Date(now).toISOString()}): the clock of the device that wrote it runs ahead. Such an op would win every last-writer-wins write until then; it is refused. Nothing of this push was stored.`,
          );
        }
        items.push(item);
      } else {
        const update = decodeBoardUpdate(item.board.update, limits, `items[${i}].board.update`);
        const { sessionId, after } = item.board;
        items.push({ seq: item.seq, board: after === undefined ? { sessionId, update } : { sessionId, update, after } });
      }
    }
    items.sort((a, b) => a.seq - b.seq);
    for (let i = 1; i < items.length; i++) {
      if (items[i]!.seq === items[i - 1]!.seq) throw new TabulaError('schema/invalid', `The push holds seq ${items[i]!.seq} twice; number items 1, 2, 3… per client.`);
    }
    const result = await store.push(userId, push.clientId, items);
    if (result.status === 'unknown-life') {
      // The store names its (sorted) item, a board update; seqs are unique, so the seq finds the request's.
      const refused = items[result.index]!;
      const i = push.items.findIndex((item) => item.seq === refused.seq);
      const life = 'board' in refused ? `${JSON.stringify(refused.board.after)}, a life of session ${JSON.stringify(refused.board.sessionId)}` : 'a life';
      throw new TabulaError(
        'schema/invalid',
        `items[${i}].board.after is ${life} that no op of this user began (a life's after is the order of the session.delete it follows, or '' for a first life); push the delete, or an op written in that life, before its board. Nothing of this push was stored.`,
      );
    }
    if (result.status === 'gap') {
      const first = items.find((item) => item.seq > result.lastSeq)!.seq;
      return c.json(
        errorBody('sync/gap', `The server has seq ${result.lastSeq} of client ${push.clientId}, and this push continues at ${first}; push from seq ${result.lastSeq + 1}.`, {
          lastSeq: result.lastSeq,
        }),
        409,
      );
    }
    return c.json({ lastSeq: result.lastSeq } satisfies PushResponse);
  });

  app.post(SYNC_PATHS.pull, async (c) => {
    const userId = await userOf(c);
    const pull = parseWire(PullRequestSchema, await readJson(c.req.raw, limits.maxBodyBytes), 'The pull body');
    const limit = Math.min(pull.limit ?? limits.maxPullItems, limits.maxPullItems);
    // The byte budget keeps a page of large items from growing past what one answer can hold.
    const after = pull.cursor === null ? 0 : Number(pull.cursor);
    const page = await store.pull(userId, after, limit, limits.maxPullBytes);
    if (page.items.length === 0 && after > 0) {
      // A cursor this store never handed out: its data is not what the client pulled from (restored from
      // an older or an empty volume). An empty answer would leave the client waiting past its own cursor for good.
      const head = await store.head(userId);
      if (after > head) {
        return c.json(
          errorBody('sync/gap', `The pull's cursor ${pull.cursor} is past everything this server holds for the user (position ${head}): its data was reset or restored. Pull from the start (cursor null) and push again what you hold.`, { head }),
          409,
        );
      }
    }
    // Built as text from the items' wire JSON, which the store made from what it validated
    // and stored: nothing of the page is parsed or serialised again.
    const items = page.items.map((item) => item.json).join(',');
    const last = page.items[page.items.length - 1];
    const cursor = last === undefined ? pull.cursor : String(last.position);
    return c.body(`{"items":[${items}],"cursor":${JSON.stringify(cursor)},"more":${page.more}}`, 200, { 'Content-Type': 'application/json' });
  });

  app.get(SYNC_PATHS.events, async (c) => {
    const { token, userId, expiresAtMs } = await authorize(c);
    const headers = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' };
    // Hono answers HEAD with this handler and drops the body unread: a stream made for it would
    // subscribe, beat and queue every poke for good.
    if (c.req.method === 'HEAD') return new Response(null, { headers });
    const held = streamsOfUser.get(userId) ?? 0;
    if (held >= limits.maxStreamsPerUser) {
      throw new TabulaError('sync/rate-limited', `This user already has ${held} event streams open on this server, the most it allows; retry once one has closed (a profile needs one, from its leading tab).`);
    }
    streamsOfUser.set(userId, held + 1);
    const encoder = new TextEncoder();
    let open = true;
    let release = (): void => {};
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    // Ends the stream from either side (client gone, server closing, token expired, reader too slow);
    // safe to call at any point of setup. An error drops what is queued at once, where close() would
    // keep it for a reader that is not reading.
    const end = (error?: TabulaError): void => {
      if (!open) return;
      open = false;
      release();
      streams.delete(end);
      const left = (streamsOfUser.get(userId) ?? 1) - 1;
      if (left === 0) streamsOfUser.delete(userId);
      else streamsOfUser.set(userId, left);
      try {
        if (error) controller?.error(error);
        else controller?.close();
      } catch {
        // Already closed by the client going away.
      }
    };
    const send = (text: string): void => {
      if (!open || !controller) return;
      const bytes = encoder.encode(text);
      // The strategy counts bytes: desiredSize is the limit less what waits for the reader. One event
      // always fits an empty queue; a reader this far behind is cut off rather than buffered for, and
      // the client's reconnect pulls what it missed.
      const room = controller.desiredSize ?? 0;
      if (room < limits.maxStreamQueueBytes && bytes.byteLength > room) {
        return end(new TabulaError('sync/too-large', `The event stream's reader fell more than ${limits.maxStreamQueueBytes} bytes behind; reconnect and pull.`));
      }
      controller.enqueue(bytes);
    };
    // A poke names the new head; with the push's items (the store's choice: few and small), also the
    // cursor they continue (null for the start of the log, as a pull of `cursor: null` reads from there).
    const poke = (head: number, appended?: StorePokeItems): void => {
      const items = appended ? `,"after":${appended.after === 0 ? 'null' : `"${appended.after}"`},"items":[${appended.items.map((item) => item.json).join(',')}]` : '';
      send(`event: poke\ndata: {"cursor":"${head}"${items},"time":${Date.now()}}\n\n`);
    };
    // The last event of a stream whose token is no longer accepted: the client reconnects with a fresh one.
    const expire = (reason: ExpiredEvent['reason']): void => {
      send(`event: expired\ndata: {"reason":"${reason}"}\n\n`);
      end();
    };
    let asking = false;
    const beat = (): void => {
      // Comments keep proxies and load balancers from closing an idle stream.
      send(': heartbeat\n\n');
      if (!isRevoked || asking) return;
      asking = true;
      Promise.resolve()
        .then(() => isRevoked(token, userId))
        .then(
          (revoked) => {
            if (revoked) expire('revoked');
          },
          (error: unknown) => console.error('tabula-server: isRevoked failed; the event stream stays open', error),
        )
        .finally(() => {
          asking = false;
        });
    };
    const body = new ReadableStream<Uint8Array>(
      {
        async start(streamController) {
          controller = streamController;
          streams.add(end);
          // Pokes carry op content: none may reach a client after its token stopped being accepted.
          const stopExpiry = expiresAtMs === null ? () => {} : at(expiresAtMs, () => expire('expired'));
          release = stopExpiry;
          try {
            const unsubscribe = await store.subscribe(userId, poke);
            const heartbeat = setInterval(beat, heartbeatMs);
            release = () => {
              stopExpiry();
              clearInterval(heartbeat);
              unsubscribe();
            };
            // Ended while subscribing: undo what was just set up.
            if (!open) return release();
            // A first poke at once: pokes sent while the client was disconnected are lost, so it pulls now.
            poke(await store.head(userId));
          } catch (error) {
            // Ended, not left open: an open stream that never subscribed would hold its user's count for good.
            if (!isTabulaError(error, 'storage/closed')) console.error('tabula-server: event stream failed', error);
            end(new TabulaError('storage/failed', 'The event stream failed; reconnect.', { cause: error }));
          }
        },
        cancel() {
          end();
        },
      },
      { highWaterMark: limits.maxStreamQueueBytes, size: (chunk) => chunk.byteLength },
    );
    return new Response(body, { headers });
  });

  const closeStreams = (): void => {
    for (const end of [...streams]) end();
  };

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
