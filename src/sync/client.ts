/**
 * The sync client: `httpSync({ url, token })` for `openTabula({ sync })`.
 * One tab per profile leads (a Web Lock): it queues blackboard changes,
 * pushes the outbox in seq order, pulls the user's items page by page
 * (ops through `applyOps`, one transaction per page; board updates into
 * the boards) and listens to the server's event stream. A poke that carries
 * its push's items is applied like a pulled page, without a pull, when the
 * items continue this client's cursor exactly; otherwise the leader pulls,
 * as it does when the browser comes online or the page gets focus, and on
 * an interval. While pokes flow, a local write's cycle only pushes. The
 * other tabs hand it their writes and show its status. Any tab's `flush()`
 * runs one push-and-pull itself. Server data is validated
 * before anything is written: a bad page changes nothing and is reported.
 *
 * Every answer of the server says its time and its store's epoch (protocol
 * SYNC_HEADERS). The time corrects the store's clock (the offset, the
 * midpoint of request and answer, is kept per user); an epoch other than
 * the one this user's state is of, a pull cursor past the server's head, or
 * a push answered with fewer items than the server acknowledged mean the
 * server lost what this device synced: the user's state starts over
 * (sync-seed.ts, `reseedOutbox`), everything held here is queued again and
 * the next pull reads from the start. An item the server refuses on its own
 * (too large, ordered too far ahead) is found by halving the push and set
 * aside ("parked", in meta, with the items behind it numbered one down), so
 * nothing waits behind it; `status().parked` lists it until the app drops it.
 */
import { TabulaError } from '../core/errors.js';
import type { JsonValue } from '../core/json.js';
import { safeParse } from '../core/validation.js';
import type { Op, OpKind } from '../core/ops.js';
import { applyOps, StaleKnownRow, type ApplyOptions, type DroppedWork, type SaveConflict } from '../store/apply/index.js';
import type { DroppedWorkInfo, SaveConflictInfo } from '../store/changes.js';
import { checkRow, sessionTables, userOutbox, type OutboxRow } from '../store/schema.js';
import { SYNC_NUDGE, syncNames, type ParkedItem, type SyncAdapter, type SyncEngine, type SyncHost, type SyncStatus } from '../store/sync-host.js';
import { reseedOutbox } from '../store/sync-seed.js';
import { utf8Length } from '../store/writer.js';
import { applyRemoteBoard, decodeBoardUpdates, queueBoard, updatesForLife } from './boards.js';
import { readPokes } from './events.js';
import {
  DEFAULT_SYNC_LIMITS,
  EPOCH,
  ErrorResponseSchema,
  PokeEventSchema,
  PullResponseSchema,
  PushResponseSchema,
  SYNC_HEADERS,
  SYNC_PATHS,
  parseWire,
  type PokeEvent,
  type PullItem,
  type PushItem,
} from './protocol.js';

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

/** The pull cursor a meta row holds; null before the first page (a pull from the start). */
function cursorOf(row: { value: unknown } | undefined): string | null {
  return typeof row?.value === 'string' ? row.value : null;
}
/** Stays under the server's default body limit with room for the envelope. */
const PUSH_BYTES = DEFAULT_SYNC_LIMITS.maxBodyBytes - 64 * 1024;
const MAX_BACKOFF_MS = 60_000;
/** The codes of a server that did nothing and asks to be asked again later, by their HTTP status. */
const RETRY_LATER_STATUS: Readonly<Record<number, TabulaError['code']>> = { 408: 'sync/timeout', 429: 'sync/rate-limited' };
const RETRY_LATER: ReadonlySet<string> = new Set(Object.values(RETRY_LATER_STATUS));
/** Statuses of a push the server refused for what it holds (invalid, another user's, too large): never taken on a retry. */
const REFUSED_STATUS: ReadonlySet<number> = new Set([400, 403, 413]);
/** The longest wait before reconnecting a stream that ended because its token expired. */
const EXPIRED_RECONNECT_MS = 1000;
/** The shortest poll interval httpSync accepts: faster would be a request storm, not a poll. */
const MIN_POLL_MS = 100;
/** The longest delay a timer honours (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * How far a measured clock offset may stray from the one in effect, beyond the measurement's own
 * uncertainty (half the round trip), before it replaces it: jitter does not rewrite the offset, a
 * clock that was set or drifted does.
 */
const OFFSET_TOLERANCE_MS = 1000;
/** Resets one cycle may run: a server whose epoch changes on every answer (two stores behind one URL) is reported, not chased. */
const MAX_RESETS_PER_CYCLE = 2;

class HttpFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

/** The server no longer holds what this user's state says it synced; `epoch` is the server's new one, when that is how it showed. */
class ServerReset extends Error {
  constructor(
    readonly epoch: string | null,
    readonly why: string,
  ) {
    super(`the sync server was reset: ${why}`);
  }
}

/** A parked item as kept in meta: the outbox row itself, and the refusal. */
interface StoredParked {
  id: string;
  seq: number;
  kind: ParkedItem['kind'];
  sessionId: string;
  messageId?: string;
  reason: { code: string; message: string };
  row: OutboxRow;
}

/** The parked items kept in meta (an absent or unreadable value is none). */
function parkedList(stored: unknown): StoredParked[] {
  return Array.isArray(stored) ? (stored as StoredParked[]).filter((entry) => typeof entry === 'object' && entry !== null && typeof entry.id === 'string') : [];
}

function parkedItems(stored: unknown): ParkedItem[] {
  return parkedList(stored).map(({ id, seq, kind, sessionId, messageId, reason }) => ({
    id,
    seq,
    kind,
    sessionId,
    ...(messageId === undefined ? {} : { messageId }),
    reason: new TabulaError(reason.code as TabulaError['code'], reason.message),
  }));
}

/** Aborts the transaction of a poke's items that this client already has ('current') or that do not continue its cursor ('stale'). */
class NotTaken extends Error {
  constructor(readonly outcome: 'current' | 'stale') {
    super(`poke items not taken: ${outcome}`);
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
  if (options.fetch !== undefined && typeof options.fetch !== 'function') {
    throw new TabulaError('argument/invalid', 'httpSync({ fetch }) must be a fetch function, or left out to use globalThis.fetch.');
  }
  const poll = options.pollIntervalMs;
  // Timers treat NaN, negative and over-2^31 delays as ~0 ms: such an interval would poll without pause.
  if (poll !== undefined && (typeof poll !== 'number' || !Number.isFinite(poll) || poll < MIN_POLL_MS || poll > MAX_TIMER_MS)) {
    throw new TabulaError('argument/invalid', `httpSync({ pollIntervalMs }) must be a number of milliseconds from ${MIN_POLL_MS} to ${MAX_TIMER_MS}, got ${String(poll)}.`);
  }
  return { start: (host) => startEngine(host, options) };
}

/** What the leader tells the other tabs of the profile, and what they ask of it. */
type TabMessage =
  | {
      v: 1;
      kind: 'status';
      state: SyncStatus['state'];
      pending: number;
      lastSyncedAt: number | null;
      error: { code: string; message: string } | null;
      parked?: Omit<StoredParked, 'row'>[];
      /** The leader's clock offset: every tab of the profile orders its writes by the same corrected clock. */
      offsetMs?: number;
    }
  | { v: 1; kind: 'nudge' };

function isTabMessage(raw: unknown): raw is TabMessage {
  if (typeof raw !== 'object' || raw === null) return false;
  const m = raw as Record<string, unknown>;
  return m.v === 1 && (m.kind === 'nudge' || (m.kind === 'status' && typeof m.state === 'string' && typeof m.pending === 'number'));
}

/** Sleeps `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
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

/** Exponential backoff with full jitter in its upper half, so many clients do not retry in step. */
function backoff(baseMs: number, failures: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, baseMs * 2 ** Math.min(failures, 10));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function startEngine(host: SyncHost, options: HttpSyncOptions): SyncEngine {
  const { db, userId } = host;
  // All of it is this user's: another user signed in on this profile has a state, an outbox and a leader of their own.
  const CURSOR_KEY = syncNames.cursor(userId);
  const CLIENT_KEY = syncNames.clientId(userId);
  const EPOCH_KEY = syncNames.epoch(userId);
  const PARKED_KEY = syncNames.parked(userId);
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => globalThis.fetch(input, init));
  const pollMs = options.pollIntervalMs ?? 5000;
  let status: SyncStatus = { state: 'idle', pending: 0, lastSyncedAt: null, parked: [] };
  const listeners = new Set<(status: SyncStatus) => void>();
  const closing = new AbortController();
  const tabs = typeof BroadcastChannel === 'function' ? new BroadcastChannel(syncNames.channel(host.name, userId)) : null;
  let paused = false;
  let closed = false;
  /** Work queued before close() (a cycle, a page) stops here instead of starting. */
  const assertRunning = (): void => {
    if (closed) throw new TabulaError('storage/closed', `Tabula "${host.name}" is closed; sync stopped.`);
  };
  let leading = false;
  let token: string | null = null;
  let failures = 0;
  let running: Promise<void> = Promise.resolve();
  /** The page being applied (a pull's or a poke's): pages apply one at a time, each continuing the cursor. */
  let applying: Promise<unknown> = Promise.resolve();
  /** Set by a nudge or a poke: the leader runs another cycle before it sleeps. */
  let nudged = false;
  /** The next cycle pulls. Only a local write's cycle may skip the pull, while pokes flow. */
  let pullWanted = true;
  /** The event stream is open and subscribed (its first poke came): pokes bring what others push. */
  let streaming = false;
  let wake: (() => void) | null = null;
  /**
   * Outbox rows that this tab's writes committed since the last push, handed over by their nudge: a
   * push sends them without reading them back when they continue what the server acknowledged.
   */
  let handed: OutboxRow[] = [];
  /** The last seq the server acknowledged for this client; null before the first push and after a failed one. */
  let acked: number | null = null;
  /** Sessions whose board may hold something not queued yet. */
  const dirtyBoards = new Set<string>();
  let boardsScanned = false;

  const setStatus = (next: Partial<SyncStatus> & { state: SyncStatus['state'] }) => {
    const { error: _dropped, ...rest } = status;
    status = { ...rest, ...next };
    for (const listener of listeners) listener(status);
    if (leading) {
      const { state, pending, lastSyncedAt, error } = status;
      const parked = status.parked.map(({ reason, ...item }) => ({ ...item, reason: { code: reason.code, message: reason.message } }));
      tabs?.postMessage({ v: 1, kind: 'status', state, pending, lastSyncedAt, error: error ? { code: error.code, message: error.message } : null, parked, offsetMs: host.clock.offsetMs() } satisfies TabMessage);
    }
  };
  const countPending = async () => userOutbox(db, userId).count();
  const readParked = async () => parkedItems((await db.meta.get(PARKED_KEY))?.value);

  const loadClientId = async (): Promise<string> => {
    const stored = await db.meta.get(CLIENT_KEY);
    if (typeof stored?.value === 'string') return stored.value;
    const id = randomClientId();
    await db.meta.put({ key: CLIENT_KEY, value: id });
    return id;
  };
  /** The client id the server numbers this user's pushes from this profile by; a new one after the server lost them. */
  let clientId = loadClientId();
  /** The epoch of the server the user's sync state is of (null before an answer named one); undefined until read. */
  let epoch: string | null | undefined;
  /**
   * Epochs this engine has left behind: an answer naming one is an old answer that arrived late (a slow
   * connection, a retry), not a server that lost its data again.
   */
  const retired = new Set<string>();

  /**
   * Takes in one measurement of the server's clock (its time when it answered, `sentAt` and
   * `receivedAt` on the device's clock): when it says the offset in effect is off by more than it
   * can tell, the store's writes are ordered by the new one from now on, here, in the other tabs, and
   * after a reload.
   */
  const correctClock = (serverMs: number, sentAt: number, receivedAt: number): void => {
    const sample = serverMs - (sentAt + receivedAt) / 2;
    const uncertainty = Math.abs(receivedAt - sentAt) / 2;
    if (!Number.isFinite(sample) || Math.abs(sample - host.clock.offsetMs()) <= uncertainty + OFFSET_TOLERANCE_MS) return;
    const offset = Math.round(sample);
    host.clock.setOffsetMs(offset);
    // Not awaited: the next write is ordered by it at once; a reload finds it once it is stored.
    void db.meta
      .bulkPut([
        { key: syncNames.clockOffset(userId), value: offset },
        { key: syncNames.profileClockOffset, value: offset },
      ])
      .catch(() => undefined);
    if (leading) setStatus({ ...status });
  };

  /**
   * Reads the server's time and epoch off an answer's headers. Throws {@link ServerReset} when the epoch
   * is not the one this user's state is of; the first epoch an answer names is taken as the state's.
   */
  const observe = async (headers: Headers, sentAt: number, receivedAt: number): Promise<void> => {
    const time = headers.get(SYNC_HEADERS.time);
    if (time !== null && /^\d{1,16}$/.test(time)) correctClock(Number(time), sentAt, receivedAt);
    const named = headers.get(SYNC_HEADERS.epoch);
    if (named === null || !EPOCH.test(named)) return;
    if (epoch === undefined) {
      const stored = await db.meta.get(EPOCH_KEY);
      epoch ??= typeof stored?.value === 'string' ? stored.value : null;
    }
    if (epoch === named) return;
    if (retired.has(named)) throw new TabulaError('sync/offline', `An answer of the sync server from before its data was reset (store ${named}) arrived late; it is ignored and sync retries.`);
    if (epoch === null) {
      epoch = named;
      await db.meta.put({ key: EPOCH_KEY, value: named });
      return;
    }
    throw new ServerReset(named, `it answers as store ${named}, and this device synced with store ${epoch}`);
  };

  /**
   * Starts the user's sync state over (see {@link ServerReset}): unless another tab has already (the
   * client id stored is no longer the one this engine pushed with), everything held here is queued again
   * under a new client id and the cursor goes; either way this engine goes on with the stored state.
   */
  const reset = async (signal: ServerReset): Promise<void> => {
    const used = await clientId;
    // In turn with the pages being applied: a page's cursor is written after its boards, and one applied
    // across the reset would put back the cursor the reset takes away (a cursor into the old server's log).
    const resetting = applying.then(() => reseedOutbox(db, userId, { clientId: randomClientId(), epoch: signal.epoch }, used));
    applying = resetting.catch(() => undefined);
    const started = await resetting;
    const [client, stored] = await db.meta.bulkGet([CLIENT_KEY, EPOCH_KEY]);
    clientId = typeof client?.value === 'string' ? Promise.resolve(client.value) : loadClientId();
    const left = epoch;
    epoch = typeof stored?.value === 'string' ? stored.value : null;
    if (typeof left === 'string' && left !== epoch) retired.add(left);
    acked = null;
    handed = [];
    // The queued snapshots of the boards went: each board is queued whole again.
    boardsScanned = false;
    if (started) {
      host.onError(
        new TabulaError(
          'sync/gap',
          `The sync server no longer holds what this device synced of user "${userId}" (${signal.why}): its data was reset or restored. Everything this device holds of the user is queued again and pulled from the start; nothing here is lost.`,
        ),
      );
    }
  };

  /**
   * Sets the outbox row `row` aside (see the module comment) after the server refused it alone: out of
   * the outbox, into the user's parked items with the refusal, and every row behind it one seq down (the
   * server takes seqs without a gap); reported to onError. Does nothing when the row is not the one at
   * its seq any more (another tab parked or pushed it meanwhile).
   */
  const park = async (row: OutboxRow, refusal: TabulaError): Promise<void> => {
    const op = row.op;
    const messageId = op && (op.kind === 'message.append' || op.kind === 'message.update' || op.kind === 'message.remove') ? op.body.id : undefined;
    const entry: StoredParked = {
      id: randomClientId(),
      seq: row.seq,
      kind: op ? op.kind : 'board',
      sessionId: op ? op.sessionId : (row.board?.sessionId ?? ''),
      ...(messageId === undefined ? {} : { messageId }),
      reason: { code: refusal.code, message: refusal.message },
      row,
    };
    const parked = await db.transaction('rw', [db.outbox, db.meta], async () => {
      const stored = await db.outbox.get([userId, row.seq]);
      if (!stored || JSON.stringify(stored) !== JSON.stringify(row)) return false;
      const behind = db.outbox.where('[userId+seq]').between([userId, row.seq], [userId, Infinity], false, true);
      const moved = (await behind.toArray()).map((later) => ({ ...later, seq: later.seq - 1 }));
      await db.outbox.where('[userId+seq]').between([userId, row.seq], [userId, Infinity], true, true).delete();
      await db.outbox.bulkAdd(moved);
      const counter = await db.meta.get(syncNames.seq(userId));
      if (typeof counter?.value === 'number') await db.meta.put({ key: syncNames.seq(userId), value: counter.value - 1 });
      const list = await db.meta.get(PARKED_KEY);
      await db.meta.put({ key: PARKED_KEY, value: [...parkedList(list?.value), entry] as unknown as JsonValue });
      return true;
    });
    // Rows handed over before the renumbering name seqs that have moved.
    handed = [];
    if (!parked) return;
    setStatus({ ...status, parked: await readParked() });
    const what = row.op ? `${row.op.kind} op ${row.op.id}` : 'blackboard update';
    host.onError(
      new TabulaError(
        refusal.code,
        `The sync server refused the ${what} of session "${entry.sessionId}" (seq ${row.seq}): ${refusal.message} It is set aside (status().parked, id "${entry.id}") and the items after it sync; what it wrote stays on this device only. Drop it with tabula.sync.dropParked("${entry.id}").`,
      ),
    );
  };

  const currentToken = async (fresh: boolean): Promise<string> => {
    if (token !== null && !fresh) return token;
    token = typeof options.token === 'string' ? options.token : await options.token();
    return token;
  };

  /** POSTs `body`; one retry with a fresh token after a 401. Every answer's headers are observed first (see {@link observe}). */
  const post = async (path: string, body: unknown): Promise<unknown> => {
    const json = JSON.stringify(body);
    for (let attempt = 0; ; attempt++) {
      const authorization = `Bearer ${await currentToken(attempt > 0)}`;
      const sentAt = host.clock.wallMs();
      const response = await doFetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization },
        body: json,
        signal: closing.signal,
      });
      const receivedAt = host.clock.wallMs();
      const text = await response.text();
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
  };

  /** Queues the boards that changed since they were last queued (each board's snapshot decides). */
  const queueBoards = async (): Promise<void> => {
    // The first time, look at every board: a change whose notice was lost (its tab crashed) is found here.
    if (!boardsScanned) {
      for (const sessionId of await host.boards.sessions()) dirtyBoards.add(sessionId);
      boardsScanned = true;
    }
    for (const sessionId of [...dirtyBoards]) {
      dirtyBoards.delete(sessionId);
      const board = await host.boards.open(sessionId);
      if (!board) continue;
      try {
        await queueBoard(db, userId, sessionId, board);
      } catch (error) {
        dirtyBoards.add(sessionId);
        throw error;
      } finally {
        await board.release();
      }
    }
  };

  /**
   * The handed-over rows when they are the outbox's head: seq acked+1, acked+2… without a gap. A row of
   * another tab in between, or no acknowledgement yet, leaves the push to read the outbox. Takes them
   * either way (the outbox holds them too).
   */
  const takeHanded = (): OutboxRow[] | null => {
    const rows = handed;
    handed = [];
    if (acked === null) return null;
    const fresh = rows.filter((row) => row.userId === userId && row.seq > (acked as number));
    return fresh.length > 0 && fresh.every((row, i) => row.seq === (acked as number) + 1 + i) ? fresh : null;
  };

  const push = async (): Promise<void> => {
    const id = await clientId;
    await queueBoards();
    /** Most items the next push takes: halved after a refusal, until the refused item goes alone and is parked. */
    let batch = DEFAULT_SYNC_LIMITS.maxPushItems;
    for (;;) {
      // A write this tab just committed goes out without a read of the outbox before it (a round trip
      // less between the write and the server); the read that follows the push finds anything else.
      const rows = takeHanded() ?? (await userOutbox(db, userId).limit(DEFAULT_SYNC_LIMITS.maxPushItems).toArray());
      if (rows.length === 0) return;
      const items: PushItem[] = [];
      const sent: OutboxRow[] = [];
      let bytes = 0;
      for (const raw of rows) {
        if (items.length === batch) break;
        const row = checkRow('outbox', [raw.userId, raw.seq], raw);
        // Only ever with its own user's token: a row of another user would put their data in this account.
        if (row.userId !== userId) throw new TabulaError('schema/invalid', `Outbox row ${JSON.stringify([raw.userId, raw.seq])} is not of user "${userId}"; nothing was pushed.`);
        const item: PushItem = row.op ? { seq: row.seq, op: row.op } : { seq: row.seq, board: row.board };
        // The server counts the body in UTF-8 bytes: text in most scripts is 2–3 of them a character.
        const size = utf8Length(JSON.stringify(item)) + 16;
        if (items.length > 0 && bytes + size > PUSH_BYTES) break;
        items.push(item);
        sent.push(raw);
        bytes += size;
      }
      let lastSeq: number;
      acked = null;
      try {
        lastSeq = parseWire(PushResponseSchema, await post(SYNC_PATHS.push, { clientId: id, items }), 'The push response').lastSeq;
      } catch (error) {
        // An item the server refuses (400, 403, 413) would be refused on every retry and hold up every
        // item behind it: halve the push until it goes alone, then set it aside.
        if (error instanceof HttpFailure && REFUSED_STATUS.has(error.status)) {
          if (items.length > 1) {
            batch = Math.ceil(items.length / 2);
          } else {
            await park(sent[0] as OutboxRow, toError(error));
            batch = DEFAULT_SYNC_LIMITS.maxPushItems;
          }
          continue;
        }
        // A 409 says what the server has: drop what it acknowledged and go on from there.
        if (!(error instanceof HttpFailure) || error.status !== 409) throw error;
        const parsed = safeParse(ErrorResponseSchema, error.body);
        if (!parsed.success || parsed.data.error.lastSeq === undefined) throw error;
        lastSeq = parsed.data.error.lastSeq;
        // Less than it acknowledged (the outbox drops only what it did): the server lost this client's items.
        const first = (items[0] as PushItem).seq;
        if (lastSeq < first - 1) throw new ServerReset(null, `it holds this client's items up to seq ${lastSeq} only, and acknowledged up to ${first - 1}`);
      }
      // The server has committed everything up to lastSeq: those rows leave the outbox.
      acked = lastSeq;
      await db.outbox.where('[userId+seq]').between([userId, -Infinity], [userId, lastSeq], true, true).delete();
      // A long outbox shows its progress; after a short one the cycle's end counts what is left.
      if (rows.length === DEFAULT_SYNC_LIMITS.maxPushItems) setStatus({ state: 'syncing', pending: await countPending() });
    }
  };

  /**
   * Applies one page of the user's items, a pull's or a poke's, and moves the cursor to `page.cursor`:
   * ops first in one transaction with applyOps (a board update may belong to a session this page
   * creates), then the board updates, then the cursor, so a crash before the cursor moves gets the page
   * again and both ops and updates apply once. With `from` (the cursor a pull asked from, or a poke's
   * `after`), only when the stored cursor is exactly `from.after`, read in the ops' transaction:
   * 'current' when it already is `page.cursor`, 'stale' for any other (the items do not continue it;
   * pull again from the stored cursor). Nothing is applied then.
   */
  const applyPage = async (page: { readonly items: readonly PullItem[]; readonly cursor: string | null }, from?: { readonly after: string | null }): Promise<'applied' | 'current' | 'stale'> => {
    const id = await clientId;
    const ops: Op[] = [];
    const boardItems: { index: number; sessionId: string; update: string; after: string | undefined }[] = [];
    for (const [index, item] of page.items.entries()) {
      if ('board' in item) {
        if (item.clientId !== id) boardItems.push({ index, sessionId: item.board.sessionId, update: item.board.update, after: item.board.after });
        continue;
      }
      if (item.op.userId !== host.userId) {
        throw new TabulaError('sync/forbidden', `The sync server sent items[${index}].op for user "${item.op.userId}", not "${host.userId}"; nothing of that page was applied.`);
      }
      if (item.clientId !== id) ops.push(item.op);
    }
    // A board update that names no life (written before lives were named) and that a delete of its
    // session follows in this page belongs to a life that ended: applied after the page's ops, it would
    // land in the session created again. Updates that name their life go only to that life (updatesForLife).
    const deletedAt = new Map<string, number>();
    for (const [index, item] of page.items.entries()) if ('op' in item && item.op.kind === 'session.delete') deletedAt.set(item.op.sessionId, index);
    const boards = decodeBoardUpdates(boardItems.filter((item) => item.after !== undefined || (deletedAt.get(item.sessionId) ?? -1) < item.index));
    const conflicts: SaveConflict[] = [];
    const dropped: DroppedWork[] = [];
    const settled: NonNullable<ApplyOptions['settled']> = [];
    /** One transaction: the page's ops, the cursor check and move; on the session rows this tab knows, or read. */
    const attempt = (known: boolean): Promise<Op[]> =>
      // A page of this client's own items only moves the cursor (a poke of its own push, mostly): no
      // reason to lock every session table for that.
      db.transaction('rw', ops.length === 0 ? [db.meta] : sessionTables(db), async () => {
        conflicts.length = 0;
        dropped.length = 0;
        settled.length = 0;
        // The cursor is read, and moved, alongside applyOps' requests rather than before and after them
        // (IndexedDB runs a transaction's requests in order, so the read sees the old cursor): two round
        // trips less before the change shows. Items that do not continue the cursor abort the whole
        // transaction, applyOps and the move with it.
        // The client id too: another tab that started the user's state over (a server reset) took the cursor
        // away, and a page of the old server must not put one back.
        const stored = from ? db.meta.bulkGet([CURSOR_KEY, CLIENT_KEY]) : undefined;
        const moved = boards.size === 0 && page.cursor !== null ? db.meta.put({ key: CURSOR_KEY, value: page.cursor }) : undefined;
        const [rows, done] = await Promise.all([stored, applyOps(db, ops, { conflicts, dropped, settled, ...(known ? { known: host.knownRows } : {}) }), moved]);
        if (from) {
          const cursor = cursorOf(rows?.[0]);
          if (rows?.[1]?.value !== id) throw new NotTaken('stale');
          if (cursor === page.cursor) throw new NotTaken('current');
          if (cursor !== from.after) throw new NotTaken('stale');
        }
        return done;
      });
    let applied: Op[];
    try {
      try {
        applied = await attempt(true);
      } catch (error) {
        // Another tab wrote a session since this tab last saw it: nothing landed; again, from the stored rows.
        if (!(error instanceof StaleKnownRow)) throw error;
        applied = await attempt(false);
      }
    } catch (error) {
      if (error instanceof NotTaken) return error.outcome;
      throw error;
    }
    for (const [sessionId, updates] of boards) {
      // A board of a session that does not exist here (deleted on this device) has nowhere to go.
      const board = await host.boards.open(sessionId);
      if (!board) continue;
      try {
        const ofThisLife = updatesForLife(board, updates);
        if (ofThisLife.length > 0) await applyRemoteBoard(db, userId, sessionId, board, ofThisLife);
      } finally {
        await board.release();
      }
    }
    if (boards.size > 0 && page.cursor !== null) {
      const next = page.cursor;
      // Moved only if nothing started the user's state over meanwhile (a reset in another tab): see the ops' transaction.
      await db.transaction('rw', db.meta, async () => {
        const [cursor, client] = await db.meta.bulkGet([CURSOR_KEY, CLIENT_KEY]);
        if (client?.value === id && (!from || cursorOf(cursor) === from.after)) await db.meta.put({ key: CURSOR_KEY, value: next });
      });
    }
    // What this device writes next follows what it has seen, in whichever session (another device's
    // writes within the clock's precision would otherwise be ordered after this device's later ones).
    for (const op of ops) host.clock.receive(op.order);
    const bySession = new Map<string, { userId: string; sessionId: string; kinds: Set<OpKind>; conflict?: SaveConflictInfo; dropped?: DroppedWorkInfo }>();
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
    for (const { userId, sessionId, messages, memory, notes, state } of dropped) {
      const entry = entryOf(userId, sessionId);
      const before = entry.dropped;
      entry.dropped = before
        ? { messages: [...before.messages, ...messages], memory: [...before.memory, ...memory], notes: [...before.notes, ...notes], state: before.state || state }
        : { messages, memory, notes, state };
    }
    if (bySession.size > 0) {
      host.publish([...bySession.values()].map(({ kinds, ...change }) => ({ ...change, kinds: [...kinds] })));
    }
    // After publishing, which forgets the rows of the sessions it names: these are the committed ones. A row
    // written since (another tab, a local write) makes the next use retry once, never land a stale row.
    for (const { userId, sessionId, row } of settled) host.knownRows.set(userId, sessionId, row);
    return 'applied';
  };

  /**
   * Applies pages one after the other. A poke's page does not wait for a cycle's push or its pull's
   * request, only for the page being applied; every page checks the cursor it continues (see applyPage).
   */
  const applyInTurn = (
    page: { readonly items: readonly PullItem[]; readonly cursor: string | null },
    from: { readonly after: string | null },
    skip: () => boolean = () => false,
  ): Promise<'applied' | 'current' | 'stale'> => {
    const next = applying.then(() => {
      assertRunning();
      return skip() ? 'stale' : applyPage(page, from);
    });
    applying = next.catch(() => undefined);
    return next;
  };

  const pull = async (): Promise<void> => {
    for (;;) {
      const cursor = cursorOf(await db.meta.get(CURSOR_KEY));
      let answer: unknown;
      try {
        answer = await post(SYNC_PATHS.pull, { cursor, limit: DEFAULT_SYNC_LIMITS.maxPullItems });
      } catch (error) {
        // The cursor is past everything the server holds: it lost what this device pulled.
        const parsed = error instanceof HttpFailure && error.status === 409 ? safeParse(ErrorResponseSchema, error.body) : null;
        if (parsed?.success && parsed.data.error.head !== undefined) throw new ServerReset(null, `its log of the user ends at ${parsed.data.error.head}, before this device's cursor ${cursor}`);
        throw error;
      }
      const page = parseWire(PullResponseSchema, answer, 'The pull response');
      // A poke may have brought some of these items while the request was out: then the page no longer
      // continues the cursor ('stale'), and the next request starts from where the cursor is now.
      const outcome = await applyInTurn(page, { after: cursor });
      if (outcome !== 'stale' && !page.more) return;
    }
  };

  const toError = (error: unknown): TabulaError => {
    if (error instanceof TabulaError) return error;
    if (error instanceof ServerReset) return new TabulaError('sync/gap', `The sync server keeps losing this device's data (${error.why}); sync stopped for now and retries. Check that one store serves this URL.`);
    if (error instanceof HttpFailure) {
      const parsed = safeParse(ErrorResponseSchema, error.body);
      const message = parsed.success ? parsed.data.error.message : `HTTP ${error.status}`;
      const code = error.status === 401 ? 'sync/unauthorized' : parsed.success ? parsed.data.error.code : (RETRY_LATER_STATUS[error.status] ?? 'sync/failed');
      return new TabulaError(code, `The sync server refused the request: ${message}`);
    }
    return new TabulaError('sync/offline', 'The sync server is unreachable; local writes are queued and sync resumes by itself.', { cause: error });
  };

  /**
   * One push-and-pull (push only, when `pulling` is false); serialized, so flush() and the leader
   * never overlap in this tab.
   */
  const cycle = (pulling = true): Promise<void> => {
    const next = running.then(async () => {
      assertRunning();
      // Pending as last counted (every local write recounts it): counting here would delay the push.
      setStatus({ state: 'syncing' });
      try {
        for (let resets = 0; ; resets++) {
          try {
            await push();
            // After a reset the cycle pulls whatever it was asked for: the server is read from the start.
            if (pulling || resets > 0) await pull();
            break;
          } catch (error) {
            if (!(error instanceof ServerReset) || resets === MAX_RESETS_PER_CYCLE) throw error;
            await reset(error);
          }
        }
        failures = 0;
        const [pending, parked] = await Promise.all([countPending(), readParked()]);
        setStatus({ state: 'idle', pending, lastSyncedAt: Date.now(), parked });
      } catch (error) {
        failures += 1;
        const failure = toError(error);
        // Refusals that mean "not now" (too many streams, a body too slow) are retried like an outage, not reported.
        const state = failure.code === 'sync/unauthorized' ? 'unauthorized' : failure.code === 'sync/offline' || RETRY_LATER.has(failure.code) ? 'offline' : 'error';
        if (state === 'unauthorized') token = null;
        if (!closed) setStatus({ state, pending: await countPending().catch(() => status.pending), error: failure });
        if (state === 'error') host.onError(failure);
        throw failure;
      }
    });
    running = next.catch(() => undefined);
    return next;
  };

  /** Wakes the leader for a cycle that pulls. */
  const nudge = () => {
    pullWanted = true;
    nudged = true;
    wake?.();
  };

  /** A poke's data as the protocol has it; null for one this client cannot read (it then pulls). */
  const pokeOf = (data: string): PokeEvent | null => {
    try {
      const parsed = safeParse(PokeEventSchema, JSON.parse(data));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  };

  /**
   * A poke from the event stream. One that carries its push's items is applied at once, without a
   * pull, when they continue this client's cursor exactly (in turn with the pages pulls apply, not
   * after a running cycle's push or pull request; never while paused); any other poke, or one whose
   * items do not continue the cursor or fail to apply, wakes the leader's cycle, whose pull gets (and
   * reports on) the same items. So does a poke of a stream whose server (`streamEpoch`) is not the
   * one this user's state is of: its positions are another log's, whatever they look like.
   */
  const onPoke = (data: string, streamEpoch: string | null) => {
    if (streamEpoch !== null && streamEpoch !== epoch) return nudge();
    const poke = pokeOf(data);
    // One way only: the poke took some time to come, so only an offset off by more than the tolerance moves.
    if (poke?.time !== undefined) {
      const now = host.clock.wallMs();
      correctClock(poke.time, now, now);
    }
    if (poke?.items === undefined || poke.after === undefined) return nudge();
    const page = { items: poke.items, cursor: poke.cursor };
    const from = { after: poke.after };
    const taken = applyInTurn(page, from, () => paused);
    taken.then(
      (outcome) => {
        if (outcome === 'stale') nudge();
      },
      () => nudge(),
    );
  };

  /** Keeps `pending` (and the parked items) current while no cycle runs (paused, offline, unauthorized). */
  const refreshPending = () => {
    Promise.all([countPending(), readParked()]).then(
      ([pending, parked]) => {
        if (!closed && (pending !== status.pending || parked.length !== status.parked.length)) setStatus({ ...status, pending, parked });
      },
      () => undefined,
    );
  };

  /**
   * A local write: the leader pushes at once, unless it is backing off (a nudge per write would be a
   * retry storm). It pulls too only when pokes do not flow: a pull right after each push would find
   * the device's own items, and keep the leader busy when the next write wants to push.
   */
  const localWrite = () => {
    refreshPending();
    if (failures !== 0) return;
    nudged = true;
    wake?.();
  };

  /** Pokes from the server's event stream wake the leader; reconnects with backoff while it leads. */
  const listen = async (): Promise<void> => {
    let streamFailures = 0;
    while (!closed) {
      let expired = false;
      try {
        const authorization = `Bearer ${await currentToken(false)}`;
        const sentAt = host.clock.wallMs();
        const response = await doFetch(`${base}${SYNC_PATHS.events}`, {
          headers: { accept: 'text/event-stream', authorization },
          signal: closing.signal,
        });
        // A new epoch is the cycle's to act on: it finds it in its own answers.
        await observe(response.headers, sentAt, host.clock.wallMs()).catch(() => nudge());
        const named = response.headers.get(SYNC_HEADERS.epoch);
        const streamEpoch = named !== null && EPOCH.test(named) ? named : null;
        if (!response.ok || !response.body) {
          await response.body?.cancel();
          // A refused token is the cycle's to renew; the stream waits for it.
          if (response.status === 401) token = null;
          throw new HttpFailure(response.status, null);
        }
        streamFailures = 0;
        // The stream took the token: a token() that was refused before works again, so sync resumes.
        if (status.state === 'unauthorized') {
          setStatus({ state: 'idle' });
          nudge();
        }
        // The server pokes once it has subscribed: from then on, pokes bring what others push.
        await readPokes(
          response.body,
          closing.signal,
          (data) => {
            streaming = true;
            onPoke(data, streamEpoch);
          },
          () => {
            // The server stops accepting the token: the reconnect and the next cycle ask for a fresh one.
            expired = true;
            token = null;
          },
        );
      } catch {
        streamFailures += 1;
      } finally {
        streaming = false;
      }
      if (closed) return;
      // The stream ended or failed: pokes may have been missed meanwhile.
      nudge();
      // An expired stream ends by design: back soon, with a fresh token, rather than after a poll interval.
      await pause(backoff(expired ? Math.min(pollMs, EXPIRED_RECONNECT_MS) : pollMs, streamFailures), closing.signal);
    }
  };

  /** The leader's loop: a cycle on every nudge, poke and poll, backing off with jitter after failures. */
  const lead = async () => {
    leading = true;
    const listening = listen();
    const removeTriggers = addTriggers(nudge);
    try {
      while (!closed) {
        nudged = false;
        const pulling = pullWanted || !streaming;
        pullWanted = false;
        if (!paused && status.state !== 'unauthorized') {
          // A cycle that failed pulls when retried.
          await cycle(pulling).catch(() => void (pullWanted = true));
        } else {
          pullWanted ||= pulling;
        }
        if (closed) break;
        if (nudged && failures === 0) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            // The poll: pull whatever a lost poke did not bring.
            pullWanted = true;
            resolve();
          }, failures === 0 ? pollMs : backoff(pollMs, failures));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = null;
      }
    } finally {
      removeTriggers();
      await listening;
    }
  };

  const stopBoardNotices = host.boards.onLocalChange((sessionId) => {
    dirtyBoards.add(sessionId);
    if (leading) localWrite();
  });
  if (tabs) {
    tabs.onmessage = (event: MessageEvent<unknown>) => {
      if (!isTabMessage(event.data)) return;
      const message = event.data;
      if (message.kind === 'nudge') {
        if (leading) localWrite();
      } else if (!leading) {
        // Another tab leads: show its status here, and order this tab's writes by its clock offset.
        const { state, pending, lastSyncedAt, error, parked, offsetMs } = message;
        if (typeof offsetMs === 'number' && Number.isFinite(offsetMs)) host.clock.setOffsetMs(offsetMs);
        setStatus({
          state,
          pending,
          lastSyncedAt,
          parked: Array.isArray(parked) ? parkedItems(parked) : status.parked,
          ...(error ? { error: new TabulaError(error.code as TabulaError['code'], error.message) } : {}),
        });
      }
    };
  }

  // What waits from before (written with sync off, or left by a crash) is counted before anything says
  // the user is synced.
  refreshPending();
  const leadership = host.locks
    .request(syncNames.leaderLock(host.name, userId), { signal: closing.signal }, lead)
    .catch((error: unknown) => {
      if (!closed) host.onError(toError(error));
    });

  return {
    status: () => status,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    flush: () => cycle(true),
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      if (status.state === 'unauthorized') setStatus({ state: 'idle' });
      nudge();
    },
    async dropParked(id) {
      if (typeof id !== 'string') throw new TabulaError('argument/invalid', `tabula.sync.dropParked(id) takes the id of an item of status().parked, got ${typeof id}.`);
      const dropped = await db.transaction('rw', db.meta, async () => {
        const list = parkedList((await db.meta.get(PARKED_KEY))?.value);
        const kept = list.filter((entry) => entry.id !== id);
        if (kept.length === list.length) return false;
        await db.meta.put({ key: PARKED_KEY, value: kept as unknown as JsonValue });
        return true;
      });
      if (dropped) {
        setStatus({ ...status, parked: await readParked() });
        // The leader (maybe another tab) shows the list it reads at its next cycle's end.
        if (!leading) tabs?.postMessage(SYNC_NUDGE satisfies TabMessage);
      }
      return dropped;
    },
    nudge(queued) {
      if (leading) {
        // More than a push holds goes through the outbox anyway (a large import): not worth keeping.
        if (queued) handed = handed.length + queued.length > DEFAULT_SYNC_LIMITS.maxPushItems ? [] : [...handed, ...queued];
        localWrite();
      } else {
        tabs?.postMessage(SYNC_NUDGE satisfies TabMessage);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      stopBoardNotices();
      wake?.();
      closing.abort();
      tabs?.close();
      await running;
      await applying;
      await leadership;
    },
  };
}

/** Calls `nudge` when the browser comes back online or the page gets focus; returns the remover. */
function addTriggers(nudge: () => void): () => void {
  const target = globalThis as Partial<Pick<Window, 'addEventListener' | 'removeEventListener'>>;
  if (typeof target.addEventListener !== 'function' || typeof target.removeEventListener !== 'function') return () => undefined;
  const onVisible = () => {
    if (typeof document === 'undefined' || document.visibilityState === 'visible') nudge();
  };
  target.addEventListener('online', nudge);
  target.addEventListener('focus', nudge);
  target.addEventListener('visibilitychange', onVisible);
  const remove = target.removeEventListener.bind(target);
  return () => {
    remove('online', nudge);
    remove('focus', nudge);
    remove('visibilitychange', onVisible);
  };
}
