/**
 * `GET /v1/events`: the server-sent event stream of a user's pokes. Each
 * stream is bounded: by its token's expiry (the last event says so), by
 * `maxStreamQueueBytes` of events its reader has not read (a reader that
 * far behind is cut off, and pulls when it reconnects), and by
 * `maxStreamsPerUser` open streams per user on this instance. A heartbeat
 * keeps proxies from closing an idle stream and asks `isRevoked` again.
 * These streams are the only state the server holds past a request.
 */
import type { Context } from 'hono';
import { TabulaError, isTabulaError } from '../core/errors.js';
import type { ExpiredEvent, SyncLimits } from '../sync/protocol.js';
import type { VerifiedToken } from './auth.js';
import { MAX_TIMER_MS } from './limits.js';
import type { ServerStore, StorePokeItems } from './store.js';

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

/** What the event streams need of the server. */
export interface EventStreamOptions {
  readonly store: ServerStore;
  readonly limits: SyncLimits;
  /** Interval of the heartbeats, in ms. */
  readonly heartbeatMs: number;
  /** The server's `isRevoked` option, asked at every heartbeat. */
  readonly isRevoked: ((token: string, userId: string) => boolean | Promise<boolean>) | undefined;
  /** The request's token, checked and not revoked; throws `sync/unauthorized`. */
  readonly authorize: (c: Context) => Promise<VerifiedToken & { readonly token: string }>;
}

/** The event streams of one server. */
export interface EventStreams {
  /** The handler of `GET /v1/events` (and HEAD). */
  handle(c: Context): Promise<Response>;
  /** Ends every open stream. */
  closeAll(): void;
}

/** The event streams of a server; nothing is open until a client asks. */
export function createEventStreams({ store, limits, heartbeatMs, isRevoked, authorize }: EventStreamOptions): EventStreams {
  const streams = new Set<() => void>();
  /** Open event streams per user, for `maxStreamsPerUser`. */
  const streamsOfUser = new Map<string, number>();

  async function handle(c: Context): Promise<Response> {
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
  }

  return {
    handle,
    closeAll() {
      for (const end of [...streams]) end();
    },
  };
}
