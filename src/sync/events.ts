/**
 * The server's event stream (`/v1/events`), read with fetch (so the token
 * travels in the Authorization header, never in the URL): the leader keeps
 * one open while it leads, reconnecting with backoff, and hands each poke
 * to the engine. `readPokes` parses one stream: `onPoke` for each `poke`
 * event with its data (the event's `data:` lines, joined as SSE joins
 * them), `onExpired` for the `expired` event that ends a stream whose token
 * is no longer accepted; heartbeat comments and other events are skipped.
 */
import { HttpFailure, backoff, pause, type Http } from './http.js';
import type { ServerWatch } from './answers.js';
import { EPOCH, SYNC_HEADERS } from './protocol.js';

/** The longest wait before reconnecting a stream that ended because its token expired. */
const EXPIRED_RECONNECT_MS = 1000;

/**
 * Reads one open event stream until it ends (resolves) or `signal` aborts (cancels the stream, so a
 * fetch that does not end its body on abort, such as a server called in-process, cannot keep it open).
 */
export async function readPokes(body: ReadableStream<Uint8Array>, signal: AbortSignal, onPoke: (data: string) => void, onExpired: () => void = () => {}): Promise<void> {
  const reader = body.getReader();
  const cancel = () => void reader.cancel().catch(() => undefined);
  if (signal.aborted) cancel();
  signal.addEventListener('abort', cancel);
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (/^event: ?expired$/m.test(block)) onExpired();
        if (!/^event: ?poke$/m.test(block)) continue;
        const data = block
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
        onPoke(data.join('\n'));
      }
    }
  } finally {
    signal.removeEventListener('abort', cancel);
    reader.releaseLock();
  }
}

/** What the stream needs of the engine. */
export interface StreamOptions {
  readonly http: Http;
  readonly watch: ServerWatch;
  readonly signal: AbortSignal;
  readonly closed: () => boolean;
  /** The poll interval, the base of the reconnect's backoff (ms). */
  readonly pollMs: number;
  /** A poke, and the epoch of the server whose stream brought it (null when its answer named none). */
  readonly onPoke: (data: string, streamEpoch: string | null) => void;
  /** The stream took the token (a token() refused before works again). */
  readonly onOpen: () => void;
  /** Wakes the leader's cycle: the stream's answer named another epoch, or the stream ended (pokes may have been missed). */
  readonly nudge: () => void;
}

/** The leader's event stream. */
export interface EventStream {
  /** Keeps a stream open until the engine closes, reconnecting with backoff. */
  run(): Promise<void>;
  /** True while a stream is open and subscribed (its first poke came): pokes bring what others push. */
  streaming(): boolean;
}

/** The event stream of the server `options.http` talks to. */
export function createEventStream(options: StreamOptions): EventStream {
  const { http, watch, signal } = options;
  let streaming = false;
  return {
    streaming: () => streaming,
    async run() {
      let streamFailures = 0;
      while (!options.closed()) {
        let expired = false;
        try {
          const { response, sentAt, receivedAt } = await http.events();
          // A new epoch is the cycle's to act on: it finds it in its own answers.
          await watch.observe(response.headers, sentAt, receivedAt).catch(() => options.nudge());
          const named = response.headers.get(SYNC_HEADERS.epoch);
          const streamEpoch = named !== null && EPOCH.test(named) ? named : null;
          if (!response.ok || !response.body) {
            await response.body?.cancel();
            // A refused token is the cycle's to renew; the stream waits for it.
            if (response.status === 401) http.forgetToken();
            throw new HttpFailure(response.status, null);
          }
          streamFailures = 0;
          options.onOpen();
          // The server pokes once it has subscribed: from then on, pokes bring what others push.
          await readPokes(
            response.body,
            signal,
            (data) => {
              streaming = true;
              options.onPoke(data, streamEpoch);
            },
            () => {
              // The server stops accepting the token: the reconnect and the next cycle ask for a fresh one.
              expired = true;
              http.forgetToken();
            },
          );
        } catch {
          streamFailures += 1;
        } finally {
          streaming = false;
        }
        if (options.closed()) return;
        // The stream ended or failed: pokes may have been missed meanwhile.
        options.nudge();
        // An expired stream ends by design: back soon, with a fresh token, rather than after a poll interval.
        await pause(backoff(expired ? Math.min(options.pollMs, EXPIRED_RECONNECT_MS) : options.pollMs, streamFailures), signal);
      }
    },
  };
}
