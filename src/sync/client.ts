/**
 * The sync client: `httpSync({ url, token })` for `openTabula({ sync })`.
 * One tab per profile leads (a Web Lock): it pushes the outbox in seq order,
 * pulls the user's items page by page through `applyOps` (one transaction
 * per page, the cursor stored in the same transaction) and polls. Any tab's
 * `flush()` runs one push-and-pull itself. Server data is validated before
 * anything is written: a bad page changes nothing and is reported.
 *
 * Not yet here (issue 12): blackboard sync and the `/v1/events` stream
 * (this polls).
 */
import { TabulaError } from '../core/errors.js';
import type { Op, OpKind } from '../core/ops.js';
import { applyOps, type SaveConflict } from '../store/apply.js';
import type { SaveConflictInfo } from '../store/changes.js';
import { sessionTables } from '../store/schema.js';
import type { SyncAdapter, SyncEngine, SyncHost, SyncStatus } from '../store/sync-host.js';
import { DEFAULT_SYNC_LIMITS, ErrorResponseSchema, PullResponseSchema, PushResponseSchema, SYNC_PATHS, parseWire, type PushItem } from './protocol.js';

/** Options of {@link httpSync}. */
export interface HttpSyncOptions {
  /** The sync server's base URL, e.g. `http://localhost:8787`. */
  readonly url: string;
  /** The bearer token (a JWT), or a function asked for one before requests and again after a 401. */
  readonly token: string | (() => string | Promise<string>);
  /** The fetch to use (tests, proxies, custom auth). @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /** How often the leader pulls. @default 5000 */
  readonly pollIntervalMs?: number;
}

const CURSOR_KEY = 'sync:cursor';
const CLIENT_KEY = 'sync:clientId';
/** Stays under the server's default body limit with room for the envelope. */
const PUSH_BYTES = DEFAULT_SYNC_LIMITS.maxBodyBytes - 64 * 1024;
const MAX_BACKOFF_MS = 60_000;

class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

function randomClientId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A sync adapter talking HTTP to a `tabula-sdk/server` sync server. */
export function httpSync(options: HttpSyncOptions): SyncAdapter {
  if (typeof options !== 'object' || options === null || typeof options.url !== 'string' || !/^https?:\/\//.test(options.url)) {
    throw new TabulaError('argument/invalid', 'httpSync({ url }) must be an http(s) URL of a Tabula sync server, e.g. "http://localhost:8787".');
  }
  if (typeof options.token !== 'string' && typeof options.token !== 'function') {
    throw new TabulaError('argument/invalid', 'httpSync({ token }) must be a JWT string or a function that returns one.');
  }
  return { start: (host) => startEngine(host, options) };
}

function startEngine(host: SyncHost, options: HttpSyncOptions): SyncEngine {
  const { db } = host;
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => globalThis.fetch(input, init));
  const pollMs = options.pollIntervalMs ?? 5000;
  let status: SyncStatus = { state: 'idle', pending: 0, lastSyncedAt: null };
  const listeners = new Set<(status: SyncStatus) => void>();
  const closing = new AbortController();
  let paused = false;
  let closed = false;
  let token: string | null = null;
  let failures = 0;
  let running: Promise<void> = Promise.resolve();
  let wake: (() => void) | null = null;

  const setStatus = (next: Partial<SyncStatus> & { state: SyncStatus['state'] }) => {
    const { error: _dropped, ...rest } = status;
    status = { ...rest, ...next };
    for (const listener of listeners) listener(status);
  };
  const countPending = async () => db.outbox.count();

  const clientId = (async () => {
    const stored = await db.meta.get(CLIENT_KEY);
    if (typeof stored?.value === 'string') return stored.value;
    const id = randomClientId();
    await db.meta.put({ key: CLIENT_KEY, value: id });
    return id;
  })();

  const currentToken = async (fresh: boolean): Promise<string> => {
    if (token !== null && !fresh) return token;
    token = typeof options.token === 'string' ? options.token : await options.token();
    return token;
  };

  /** POSTs `body`; one retry with a fresh token after a 401. */
  const post = async (path: string, body: unknown): Promise<unknown> => {
    for (let attempt = 0; ; attempt++) {
      const response = await doFetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await currentToken(attempt > 0)}` },
        body: JSON.stringify(body),
        signal: closing.signal,
      });
      const text = await response.text();
      let json: unknown;
      try {
        json = text === '' ? null : JSON.parse(text);
      } catch {
        throw new TabulaError('schema/invalid', `The sync server answered ${path} with something that is not JSON (HTTP ${response.status}).`);
      }
      if (response.ok) return json;
      if (response.status === 401 && attempt === 0 && typeof options.token === 'function') continue;
      throw new HttpFailure(response.status, json);
    }
  };

  const push = async (): Promise<void> => {
    const id = await clientId;
    for (;;) {
      const rows = await db.outbox.orderBy('seq').limit(DEFAULT_SYNC_LIMITS.maxPushItems).toArray();
      if (rows.length === 0) return;
      const items: PushItem[] = [];
      let bytes = 0;
      for (const row of rows) {
        const size = JSON.stringify(row.op).length + 32;
        if (items.length > 0 && bytes + size > PUSH_BYTES) break;
        items.push({ seq: row.seq as number, op: row.op });
        bytes += size;
      }
      let lastSeq: number;
      try {
        lastSeq = parseWire(PushResponseSchema, await post(SYNC_PATHS.push, { clientId: id, items }), 'The push response').lastSeq;
      } catch (error) {
        // A 409 says what the server has: drop what it acknowledged and go on from there.
        if (!(error instanceof HttpFailure) || error.status !== 409) throw error;
        const parsed = ErrorResponseSchema.safeParse(error.body);
        if (!parsed.success || parsed.data.error.lastSeq === undefined) throw error;
        lastSeq = parsed.data.error.lastSeq;
        if (lastSeq < (items[0] as PushItem).seq - 1) {
          throw new TabulaError('sync/gap', `The sync server has this client's items up to ${lastSeq} only, and the outbox starts at ${(items[0] as PushItem).seq}.`);
        }
      }
      // The server has committed everything up to lastSeq: those rows leave the outbox.
      await db.outbox.where('seq').belowOrEqual(lastSeq).delete();
      setStatus({ state: 'syncing', pending: await countPending() });
    }
  };

  const pull = async (): Promise<void> => {
    const id = await clientId;
    for (;;) {
      const stored = await db.meta.get(CURSOR_KEY);
      const cursor = typeof stored?.value === 'string' ? stored.value : null;
      const page = parseWire(PullResponseSchema, await post(SYNC_PATHS.pull, { cursor, limit: DEFAULT_SYNC_LIMITS.maxPullItems }), 'The pull response');
      const ops: Op[] = [];
      for (const [index, item] of page.items.entries()) {
        if (!('op' in item)) continue; // blackboard items: not synced by this client yet
        if (item.op.userId !== host.userId) {
          throw new TabulaError('sync/forbidden', `The sync server sent items[${index}].op for user "${item.op.userId}", not "${host.userId}"; nothing of that page was applied.`);
        }
        if (item.clientId !== id) ops.push(item.op);
      }
      const conflicts: SaveConflict[] = [];
      const applied = await db.transaction('rw', sessionTables(db), async () => {
        const done = await applyOps(db, ops, conflicts);
        if (page.cursor !== null) await db.meta.put({ key: CURSOR_KEY, value: page.cursor });
        return done;
      });
      const bySession = new Map<string, { userId: string; sessionId: string; kinds: Set<OpKind>; conflict?: SaveConflictInfo }>();
      const entryOf = (userId: string, sessionId: string) => {
        const key = JSON.stringify([userId, sessionId]);
        const entry = bySession.get(key) ?? { userId, sessionId, kinds: new Set<OpKind>() };
        bySession.set(key, entry);
        return entry;
      };
      for (const op of applied) entryOf(op.userId, op.sessionId).kinds.add(op.kind);
      // Only the device whose save lost hears of it; the others just see the winner.
      for (const { userId, sessionId, lost, won } of conflicts) {
        if (await host.isLocalOrder(lost.order)) entryOf(userId, sessionId).conflict = { version: lost.version, local: lost.state, remote: won.state };
      }
      if (bySession.size > 0) {
        host.publish([...bySession.values()].map(({ kinds, ...change }) => ({ ...change, kinds: [...kinds] })));
      }
      if (!page.more) return;
    }
  };

  const toError = (error: unknown): TabulaError => {
    if (error instanceof TabulaError) return error;
    if (error instanceof HttpFailure) {
      const parsed = ErrorResponseSchema.safeParse(error.body);
      const message = parsed.success ? parsed.data.error.message : `HTTP ${error.status}`;
      const code = error.status === 401 ? 'sync/unauthorized' : parsed.success ? parsed.data.error.code : 'sync/failed';
      return new TabulaError(code, `The sync server refused the request: ${message}`);
    }
    return new TabulaError('sync/offline', 'The sync server is unreachable; local writes are queued and sync resumes by itself.', { cause: error });
  };

  /** One push-and-pull; serialized, so flush() and the leader never overlap in this tab. */
  const cycle = (): Promise<void> => {
    const next = running.then(async () => {
      if (closed) throw new TabulaError('storage/closed', `Tabula "${host.name}" is closed; sync stopped.`);
      setStatus({ state: 'syncing', pending: await countPending() });
      try {
        await push();
        await pull();
        failures = 0;
        setStatus({ state: 'idle', pending: await countPending(), lastSyncedAt: Date.now() });
      } catch (error) {
        failures += 1;
        const failure = toError(error);
        const state = failure.code === 'sync/unauthorized' ? 'unauthorized' : failure.code === 'sync/offline' ? 'offline' : 'error';
        if (state === 'unauthorized') token = null;
        if (!closed) setStatus({ state, pending: await countPending().catch(() => status.pending), error: failure });
        if (state === 'error') host.onError(failure);
        throw failure;
      }
    });
    running = next.catch(() => undefined);
    return next;
  };

  /** The leader's loop: a cycle on every nudge and poll, backing off with jitter after failures. */
  const lead = async () => {
    while (!closed) {
      if (!paused && status.state !== 'unauthorized') await cycle().catch(() => undefined);
      const backoff = failures === 0 ? pollMs : Math.min(MAX_BACKOFF_MS, pollMs * 2 ** Math.min(failures, 10));
      const delay = failures === 0 ? backoff : backoff / 2 + Math.random() * (backoff / 2);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  };

  const leading = host.locks
    .request(`tabula:${host.name}:sync-leader`, { signal: closing.signal }, lead)
    .catch((error: unknown) => {
      if (!closed) host.onError(toError(error));
    });

  return {
    status: () => status,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    flush: () => cycle(),
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      if (status.state === 'unauthorized') setStatus({ state: 'idle' });
      wake?.();
    },
    nudge() {
      if (failures === 0) wake?.();
    },
    async close() {
      if (closed) return;
      closed = true;
      wake?.();
      closing.abort();
      await running;
      await leading;
    },
  };
}
