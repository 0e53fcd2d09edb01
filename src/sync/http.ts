/**
 * The sync client's HTTP: requests to the sync server with the bearer
 * token (asked of the app's `token()` before the first request and again
 * after a 401), every answer's headers handed to the caller before its body
 * is judged, and what went wrong named once: {@link syncError} turns any
 * failure of a cycle into the TabulaError the app sees. Only a request that
 * never got an answer (fetch rejected, the body broke off) is
 * `sync/offline`; a refusal carries the server's code; a `token()` that
 * throws is `sync/unauthorized` (no token to send); a TabulaError (a
 * store's full disk is `storage/quota-exceeded`) keeps its own; anything
 * else is a fault of this code, `sync/failed` with the cause attached. It
 * knows nothing of what the bodies mean.
 */
import { TabulaError } from '../core/errors.js';
import { safeParse } from '../core/validation.js';
import { ErrorResponseSchema, SYNC_PATHS } from './protocol.js';

/** What the HTTP client needs of httpSync's options. */
export interface HttpOptions {
  readonly url: string;
  readonly token: string | (() => string | Promise<string>);
  readonly fetch?: typeof fetch;
}

/** The server answered with a status other than 2xx. */
export class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

/** The server no longer holds what this user's state says it synced; `epoch` is the server's new one, when that is how it showed. */
export class ServerReset extends Error {
  constructor(
    readonly epoch: string | null,
    readonly why: string,
  ) {
    super(`the sync server was reset: ${why}`);
  }
}

/** The codes of a server that did nothing and asks to be asked again later, by their HTTP status. */
const RETRY_LATER_STATUS: Readonly<Record<number, TabulaError['code']>> = { 408: 'sync/timeout', 429: 'sync/rate-limited' };
/** The codes of {@link RETRY_LATER_STATUS}: a cycle that fails with one is retried like an outage, not reported. */
export const RETRY_LATER: ReadonlySet<string> = new Set(Object.values(RETRY_LATER_STATUS));

/** A request that got no answer: the network, or a server that is down. */
function offline(cause: unknown): TabulaError {
  return new TabulaError('sync/offline', 'The sync server is unreachable; local writes are queued and sync resumes by itself.', { cause });
}

/** The TabulaError of a failed cycle (see the module comment). */
export function syncError(error: unknown): TabulaError {
  if (error instanceof TabulaError) return error;
  if (error instanceof ServerReset) return new TabulaError('sync/gap', `The sync server keeps losing this device's data (${error.why}); sync stopped for now and retries. Check that one store serves this URL.`);
  if (error instanceof HttpFailure) {
    const parsed = safeParse(ErrorResponseSchema, error.body);
    const message = parsed.success ? parsed.data.error.message : `HTTP ${error.status}`;
    const code = error.status === 401 ? 'sync/unauthorized' : parsed.success ? parsed.data.error.code : (RETRY_LATER_STATUS[error.status] ?? 'sync/failed');
    return new TabulaError(code, `The sync server refused the request: ${message}`);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new TabulaError('sync/failed', `Sync failed on an internal error (${message}); it retries. Please report it with its cause.`, { cause: error });
}

/** Requests to one sync server, as one user (see the module comment). */
export interface Http {
  /**
   * POSTs `body` as JSON and resolves with the answer's JSON; one retry with a fresh token after a 401.
   * `observe` sees every answer's headers first, with the device's clock when the request went and when
   * the answer came (ms); whatever it throws fails the request. Rejects with {@link HttpFailure} for a
   * refusal.
   */
  post(path: string, body: unknown, observe: (headers: Headers, sentAt: number, receivedAt: number) => Promise<void>): Promise<unknown>;
  /** Opens the event stream, with the device's clock when the request went and when the answer came; `sync/offline` when none came. */
  events(): Promise<{ response: Response; sentAt: number; receivedAt: number }>;
  /** Forgets the token: the server refused it, or stopped accepting it; the next request asks for one. */
  forgetToken(): void;
}

/** The HTTP client of `options`; `wallMs` is the device's clock, `signal` aborts every request (close()). */
export function createHttp(options: HttpOptions, wallMs: () => number, signal: AbortSignal): Http {
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => globalThis.fetch(input, init));
  let token: string | null = null;

  const currentToken = async (fresh: boolean): Promise<string> => {
    if (token !== null && !fresh) return token;
    if (typeof options.token === 'string') return (token = options.token);
    try {
      token = await options.token();
    } catch (error) {
      // The app's own code: without a token there is nothing to send, and sync waits for one as it does
      // for a refused one (the event stream asks again, with backoff; so does resume()).
      if (error instanceof TabulaError) throw error;
      const message = error instanceof Error ? error.message : String(error);
      throw new TabulaError('sync/unauthorized', `httpSync({ token }) failed to give a token (${message}); sync waits until it gives one.`, { cause: error });
    }
    return token;
  };

  /** The answer of a request, or `sync/offline` when none came. */
  const request = async (path: string, init: RequestInit): Promise<Response> => {
    try {
      return await doFetch(`${base}${path}`, { ...init, signal });
    } catch (error) {
      throw offline(error);
    }
  };

  return {
    async post(path, body, observe) {
      const json = JSON.stringify(body);
      for (let attempt = 0; ; attempt++) {
        const authorization = `Bearer ${await currentToken(attempt > 0)}`;
        const sentAt = wallMs();
        const response = await request(path, { method: 'POST', headers: { 'content-type': 'application/json', authorization }, body: json });
        const receivedAt = wallMs();
        let text: string;
        try {
          text = await response.text();
        } catch (error) {
          // The answer broke off: as good as none.
          throw offline(error);
        }
        await observe(response.headers, sentAt, receivedAt);
        let answer: unknown;
        try {
          answer = text === '' ? null : JSON.parse(text);
        } catch {
          throw new TabulaError('schema/invalid', `The sync server answered ${path} with something that is not JSON (HTTP ${response.status}).`);
        }
        if (response.ok) return answer;
        if (response.status === 401 && attempt === 0 && typeof options.token === 'function') continue;
        throw new HttpFailure(response.status, answer);
      }
    },
    async events() {
      const authorization = `Bearer ${await currentToken(false)}`;
      const sentAt = wallMs();
      const response = await request(SYNC_PATHS.events, { headers: { accept: 'text/event-stream', authorization } });
      return { response, sentAt, receivedAt: wallMs() };
    },
    forgetToken() {
      token = null;
    },
  };
}

const MAX_BACKOFF_MS = 60_000;

/** Exponential backoff with full jitter in its upper half, so many clients do not retry in step. */
export function backoff(baseMs: number, failures: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(failures, 10));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Sleeps `ms`, or less when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}
