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
  SYNC_PATHS,
  parseWire,
  type ErrorResponse,
  type HealthResponse,
  type PushResponse,
  type SyncErrorCode,
  type SyncLimits,
} from '../sync/protocol.js';
import { bearerToken, createVerifier, type SyncAuth } from './auth.js';
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

const STATUS: Record<SyncErrorCode, 400 | 401 | 403 | 404 | 409 | 413 | 500> = {
  'schema/invalid': 400,
  'sync/unauthorized': 401,
  'sync/forbidden': 403,
  'sync/not-found': 404,
  'sync/gap': 409,
  'sync/too-large': 413,
  'storage/failed': 500,
};

function errorBody(code: SyncErrorCode, message: string, extra: { lastSeq?: number } = {}): ErrorResponse {
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
 * Reads a body of at most `maxBytes` without buffering more than that. A
 * body with `Content-Length` is read in one go (the HTTP parser delivers no
 * more than it declares; @hono/node-server then reads it straight from the
 * socket, without a web stream) and its size checked again; a chunked body
 * is counted as it comes and cut off past the limit.
 */
async function readJson(request: Request, maxBytes: number): Promise<unknown> {
  const tooLarge = (): TabulaError => new TabulaError('sync/too-large', `The request body is over the ${maxBytes}-byte limit; split the push.`);
  const declared = request.headers.get('content-length');
  let bytes: Buffer;
  if (declared !== null && /^\d+$/.test(declared)) {
    if (Number(declared) > maxBytes) throw tooLarge();
    bytes = Buffer.from(await request.arrayBuffer());
    if (bytes.byteLength > maxBytes) throw tooLarge();
  } else {
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (request.body) {
      const reader = request.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
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
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new TabulaError('schema/invalid', 'The request body is not JSON; send `Content-Type: application/json` with a JSON object.');
  }
}

/** Creates a sync server over `store`. Nothing listens until {@link SyncServer.listen}. */
export function createSyncServer(options: SyncServerOptions): SyncServer {
  const { store } = options;
  const limits: SyncLimits = { ...DEFAULT_SYNC_LIMITS, ...options.limits };
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const verify = createVerifier(options.auth);
  const streams = new Set<() => void>();
  const listening = new Set<ListeningServer>();

  const userOf = (c: Context): Promise<string> => verify(bearerToken(c.req.header('authorization')));

  const app = new Hono();
  if (options.cors) {
    app.use(
      '*',
      honoCors({
        origin: typeof options.cors.origin === 'string' ? options.cors.origin : [...options.cors.origin],
        allowHeaders: ['Authorization', 'Content-Type'],
        allowMethods: ['GET', 'POST', 'OPTIONS'],
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
    for (const [i, item] of push.items.entries()) {
      if ('op' in item) {
        // Refuse the whole push: storing the rest would leave the client unable to tell what landed.
        if (item.op.userId !== userId) {
          throw new TabulaError('sync/forbidden', `items[${i}].op.userId is not the user of the token; a client pushes only its own user's ops. Nothing of this push was stored.`);
        }
        items.push(item);
      } else {
        const update = decodeBoardUpdate(item.board.update, limits.maxUpdateBytes, `items[${i}].board.update`);
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
    const page = await store.pull(userId, pull.cursor === null ? 0 : Number(pull.cursor), limit, limits.maxPullBytes);
    // Built as text from the items' wire JSON, which the store made from what it validated
    // and stored: nothing of the page is parsed or serialised again.
    const items = page.items.map((item) => item.json).join(',');
    const last = page.items[page.items.length - 1];
    const cursor = last === undefined ? pull.cursor : String(last.position);
    return c.body(`{"items":[${items}],"cursor":${JSON.stringify(cursor)},"more":${page.more}}`, 200, { 'Content-Type': 'application/json' });
  });

  app.get(SYNC_PATHS.events, async (c) => {
    const userId = await userOf(c);
    const encoder = new TextEncoder();
    let open = true;
    let release = (): void => {};
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    // Ends the stream from either side (client gone, server closing); safe to call at any point of setup.
    const end = (): void => {
      if (!open) return;
      open = false;
      release();
      streams.delete(end);
      try {
        controller?.close();
      } catch {
        // Already closed by the client going away.
      }
    };
    const send = (text: string): void => {
      if (open) controller?.enqueue(encoder.encode(text));
    };
    // A poke names the new head; with the push's items (the store's choice: few and small), also the
    // cursor they continue (null for the start of the log, as a pull of `cursor: null` reads from there).
    const poke = (head: number, appended?: StorePokeItems): void => {
      const items = appended ? `,"after":${appended.after === 0 ? 'null' : `"${appended.after}"`},"items":[${appended.items.map((item) => item.json).join(',')}]` : '';
      send(`event: poke\ndata: {"cursor":"${head}"${items}}\n\n`);
    };
    const body = new ReadableStream<Uint8Array>({
      async start(streamController) {
        controller = streamController;
        streams.add(end);
        const unsubscribe = await store.subscribe(userId, poke);
        // Comments keep proxies and load balancers from closing an idle stream.
        const heartbeat = setInterval(() => send(': heartbeat\n\n'), heartbeatMs);
        release = () => {
          clearInterval(heartbeat);
          unsubscribe();
        };
        // Cancelled while subscribing: undo what was just set up.
        if (!open) return release();
        // A first poke at once: pokes sent while the client was disconnected are lost, so it pulls now.
        poke(await store.head(userId));
      },
      cancel() {
        end();
      },
    });
    return new Response(body, {
      headers: { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' },
    });
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
