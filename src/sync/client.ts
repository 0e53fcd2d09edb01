/**
 * The sync client: `httpSync({ url, token })` for `openTabula({ sync })`.
 * One tab per profile and user leads (leader.ts): it queues blackboard
 * changes, pushes the outbox in seq order and pulls the user's items page
 * by page (cycle.ts), and listens to the server's event stream (events.ts).
 * A poke that carries its push's items is applied like a pulled page,
 * without a pull, when the items continue this client's cursor exactly;
 * otherwise the leader pulls, as it does when the browser comes online or
 * the page gets focus, and on an interval. While pokes flow, a local
 * write's cycle only pushes. The other tabs hand it their writes and show
 * its status. Any tab's `flush()` runs one push-and-pull itself. Server data
 * is validated against the wire protocol before the store sees it; what it
 * means, and every write, is the store's (its replica: see
 * `src/store/replication/contract.ts`), so a bad page changes nothing and
 * is reported.
 *
 * Every answer of the server says its time and its store's epoch (protocol
 * SYNC_HEADERS; answers.ts). The time corrects the store's clock; an epoch
 * other than the one this user's state is of, a pull cursor past the
 * server's head, or a push answered with fewer items than the server
 * acknowledged mean the server lost what this device synced: the user's
 * state starts over (`Replica.reseed`), everything held here is queued
 * again and the next pull reads from the start. An item the server refuses
 * on its own (too large, ordered too far ahead) is found by halving the
 * push and set aside ("parked"), so nothing waits behind it;
 * `status().parked` lists it until the app drops it.
 *
 * This module holds the options and the wiring, and the leader's loop:
 * when a cycle runs (a nudge, a poke, a poll, backing off after failures).
 */
import { TabulaError } from '../core/errors.js';
import { safeParse } from '../core/validation.js';
import { openReplica, type SyncAdapter, type SyncEngine, type SyncHost } from '../store/replication/contract.js';
import { createServerWatch } from './answers.js';
import { createCycles } from './cycle.js';
import { createEventStream } from './events.js';
import { backoff, createHttp, syncError } from './http.js';
import { joinLeadership } from './leader.js';
import { DEFAULT_SYNC_LIMITS, PokeEventSchema, type PokeEvent } from './protocol.js';

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

/** The shortest poll interval httpSync accepts: faster would be a request storm, not a poll. */
const MIN_POLL_MS = 100;
/** The longest delay a timer honours (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

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

/** A poke's data as the protocol has it; null for one this client cannot read (it then pulls). */
function pokeOf(data: string): PokeEvent | null {
  try {
    const parsed = safeParse(PokeEventSchema, JSON.parse(data));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

function startEngine(host: SyncHost, options: HttpSyncOptions): SyncEngine {
  // All of it is this user's: another user signed in on this profile has a state, an outbox and a leader of their own.
  const replica = openReplica(host, { maxPushItems: DEFAULT_SYNC_LIMITS.maxPushItems });
  const pollMs = options.pollIntervalMs ?? 5000;
  const closing = new AbortController();
  let closed = false;
  let paused = false;
  /** Set by a nudge or a poke: the leader runs another cycle before it sleeps. */
  let nudged = false;
  /** The next cycle pulls. Only a local write's cycle may skip the pull, while pokes flow. */
  let pullWanted = true;
  let wake: (() => void) | null = null;

  const http = createHttp(options, () => host.clock.wallMs(), closing.signal);
  const leadership = joinLeadership(host, { lead: () => lead(), onNudge: () => localWrite(), signal: closing.signal, closed: () => closed, toError: syncError });
  const watch = createServerWatch(host.clock, replica, () => {
    if (leadership.leading()) leadership.setStatus({ ...leadership.status() });
  });
  const cycles = createCycles({ host, replica, http, watch, leadership, closed: () => closed });

  /** Wakes the leader for a cycle that pulls. */
  const nudge = () => {
    pullWanted = true;
    nudged = true;
    wake?.();
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
    if (streamEpoch !== null && streamEpoch !== watch.epoch()) return nudge();
    const poke = pokeOf(data);
    // One way only: the poke took some time to come, so only an offset off by more than the tolerance moves.
    if (poke?.time !== undefined) {
      const now = host.clock.wallMs();
      watch.correctClock(poke.time, now, now);
    }
    if (poke?.items === undefined || poke.after === undefined) return nudge();
    cycles.applyInTurn({ items: poke.items, cursor: poke.cursor }, { after: poke.after }, () => paused).then(
      (outcome) => {
        if (outcome === 'stale') nudge();
      },
      () => nudge(),
    );
  };

  const stream = createEventStream({
    http,
    watch,
    signal: closing.signal,
    closed: () => closed,
    pollMs,
    onPoke,
    nudge,
    onOpen() {
      // The stream took the token: a token() that was refused before works again, so sync resumes.
      if (leadership.status().state === 'unauthorized') {
        leadership.setStatus({ state: 'idle' });
        nudge();
      }
    },
  });

  /** Keeps `pending` (and the parked items) current while no cycle runs (paused, offline, unauthorized). */
  const refreshPending = () => {
    replica.waiting().then(
      ({ pending, parked }) => {
        const status = leadership.status();
        if (!closed && (pending !== status.pending || parked.length !== status.parked.length)) leadership.setStatus({ ...status, pending, parked });
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
    if (cycles.failures() !== 0) return;
    nudged = true;
    wake?.();
  };

  /** The leader's loop: a cycle on every nudge, poke and poll, backing off with jitter after failures. */
  const lead = async () => {
    const listening = stream.run();
    const removeTriggers = addTriggers(nudge);
    try {
      while (!closed) {
        nudged = false;
        const pulling = pullWanted || !stream.streaming();
        pullWanted = false;
        if (!paused && leadership.status().state !== 'unauthorized') {
          // A cycle that failed pulls when retried.
          await cycles.run(pulling).catch(() => void (pullWanted = true));
        } else {
          pullWanted ||= pulling;
        }
        if (closed) break;
        if (nudged && cycles.failures() === 0) continue;
        await new Promise<void>((resolve) => {
          const failures = cycles.failures();
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

  const stopBoardNotices = replica.onBoardChange(() => {
    if (leadership.leading()) localWrite();
  });
  // What waits from before (written with sync off, or left by a crash) is counted before anything says
  // the user is synced.
  refreshPending();
  leadership.stand();

  return {
    status: () => leadership.status(),
    subscribe: (listener) => leadership.subscribe(listener),
    flush: () => cycles.run(true),
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      if (leadership.status().state === 'unauthorized') leadership.setStatus({ state: 'idle' });
      nudge();
    },
    async dropParked(id) {
      if (typeof id !== 'string') throw new TabulaError('argument/invalid', `tabula.sync.dropParked(id) takes the id of an item of status().parked, got ${typeof id}.`);
      const dropped = await replica.dropParked(id);
      if (dropped) {
        leadership.setStatus({ ...leadership.status(), parked: (await replica.waiting()).parked });
        // The leader (maybe another tab) shows the list it reads at its next cycle's end.
        if (!leadership.leading()) leadership.nudgeLeader();
      }
      return dropped;
    },
    nudge(queued) {
      if (leadership.leading()) {
        if (queued) replica.hand(queued);
        localWrite();
      } else {
        leadership.nudgeLeader();
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      stopBoardNotices();
      wake?.();
      closing.abort();
      const left = leadership.close();
      await cycles.settled();
      await left;
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
