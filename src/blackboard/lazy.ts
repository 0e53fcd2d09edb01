/**
 * The blackboard registry as a Tabula holds it: Yjs, y-indexeddb and the
 * cross-tab provider (registry.ts) are loaded by a dynamic import on the
 * first use of a board, so a page that never opens one never downloads or
 * parses them. Once loaded, every lease is the registry's own.
 *
 * While the code loads (one chunk fetch, the first time only), a board is
 * a stand-in with the same contract: writes are checked at once (same
 * errors), applied to an in-memory view that reads see, reported to
 * observe() listeners at once as `local`, and replayed into the Y.Doc, in
 * order and with the same transaction grouping, when it arrives; so
 * `flushed()` still means durable. What the stand-in cannot give is the
 * Y.Doc itself: `doc` throws `blackboard/loading` until `whenLoaded`.
 * A session deleted before the code loaded has its board database deleted
 * and the delete announced to the other tabs without loading Yjs at all;
 * what a delete says of the board (boardSeen, unseenKeys) is found without
 * Yjs too when the board's database stores nothing.
 */
import { isTabulaError, TabulaError } from '../core/errors.js';
import { cloneJson, type JsonValue } from '../core/json.js';
import type { Blackboard, BlackboardChange } from './blackboard.js';
import { checkEntries, checkFunction, checkKey, checkValue } from './checks.js';
import { blackboardDatabaseName, boardLivesOnDisk, deleteDocDatabase, EMPTY_BOARD_SEEN, livesChannelName, readBoardUpdates, type LifeEnded } from './lives.js';
import type { BoardLease, BoardRegistry, BoardRegistryOptions } from './registry.js';

/** The module with Yjs in it; a test passes its own to hold the load back. */
export type BoardCode = () => Promise<{ createBoardRegistry(options: BoardRegistryOptions): BoardRegistry }>;

export interface LazyBoardRegistryOptions extends BoardRegistryOptions {
  /** @default a dynamic import of registry.ts */
  load?: BoardCode;
}

/** A write made before the code loaded, replayed into the real board once it is there. */
type Replay = (board: Blackboard) => void;

type Listener = (changes: BlackboardChange[]) => void;

/** The boards of one session acquired before the code loaded: one shared view, as one Y.Doc would be. */
interface Waiting {
  readonly userId: string;
  readonly sessionId: string;
  /** The life its leases were asked for (see `BoardRegistry.acquire`). */
  readonly life: string | undefined;
  readonly values: Map<string, JsonValue>;
  readonly replays: Replay[];
  readonly leases: StandIn[];
}

/** One lease handed out before the code loaded. */
interface StandIn {
  released: boolean;
  /** The registry's lease, once the code is in (null if this one was released before). */
  real: BoardLease | null;
  /** Listeners added before the code loaded; moved onto the real board when it is there. */
  readonly listeners: Set<{ listener: Listener; stop: () => void }>;
}

const defaultLoad: BoardCode = () => import('./registry.js');

/** A BoardRegistry that loads Yjs on the first `acquire()`. */
export function createLazyBoardRegistry(options: LazyBoardRegistryOptions): BoardRegistry {
  const { load = defaultLoad, ...registryOptions } = options;
  let real: BoardRegistry | null = null;
  let loading: Promise<BoardRegistry> | null = null;
  const waiting = new Map<string, Waiting>();
  const key = (userId: string, sessionId: string, life: string | undefined) => JSON.stringify([userId, sessionId, life ?? null]);

  /**
   * Puts the writes made while loading into the real board, then hands it the listeners. Resolves once
   * the writes of a board every handle let go of meanwhile are durable; never rejects, so one session's
   * board cannot fail the load for the others.
   */
  const connect = (registry: BoardRegistry, w: Waiting): Promise<void> => {
    const open = w.leases
      .filter((lease) => !lease.released)
      .map((lease) => ({ lease, real: (lease.real = registry.acquire(w.userId, w.sessionId, w.life)) }));
    // Every handle let go of the board before the code came: the writes were accepted, so they are stored.
    const target = open[0]?.real ?? (w.replays.length > 0 ? registry.acquire(w.userId, w.sessionId, w.life) : null);
    if (!target) return Promise.resolve();
    // The registry is fresh, so its board is open and takes every write the stand-in accepted; if the
    // session was deleted before the code came, the board closes once it learns so, and the writes go with it.
    for (const replay of w.replays) replay(target.blackboard);
    w.replays.length = 0;
    for (const { lease, real } of open) {
      for (const entry of lease.listeners) entry.stop = real.blackboard.observe(entry.listener);
      lease.listeners.clear();
    }
    if (open.length > 0) return Promise.resolve();
    return target.blackboard.whenLoaded
      .then(() => target.blackboard.flushed())
      .catch((error: unknown) => {
        // Deleted before the code came: the writes went with the session. A storage/failed (flushed()
        // rejects with TabulaErrors only) lost them, and no handle is left to hear it: report it.
        if (isTabulaError(error) && error.code !== 'session/not-found') registryOptions.onError(error);
      })
      .finally(() => target.release());
  };

  const start = (): Promise<BoardRegistry> =>
    (loading ??= load().then(
      async (code) => {
        const registry = code.createBoardRegistry(registryOptions);
        const flushes = [...waiting.values()].map((w) => connect(registry, w));
        waiting.clear();
        real = registry;
        await Promise.all(flushes);
        return registry;
      },
      (error: unknown) => {
        // The next use of a board tries again (a chunk fetch may fail once offline); the boards waiting
        // now stay waiting, so their writes are replayed by the load that succeeds.
        loading = null;
        const failure = new TabulaError('storage/failed', 'Could not load the blackboard code (Yjs); check that the bundle serves its lazy chunk.', { cause: error });
        registryOptions.onError(failure);
        throw failure;
      },
    ));

  const standIn = (userId: string, sessionId: string, life: string | undefined): BoardLease => {
    const k = key(userId, sessionId, life);
    let w = waiting.get(k);
    if (!w) waiting.set(k, (w = { userId, sessionId, life, values: new Map(), replays: [], leases: [] }));
    const shared = w;
    const lease: StandIn = { released: false, real: null, listeners: new Set() };
    shared.leases.push(lease);
    // The load under way, or done; null after a failed one, so the next read of whenLoaded tries again
    // (a chunk fetch may fail once offline), as the next acquire() or flushed() would.
    let loaded: Promise<void> | null = null;
    const whenLoaded = (): Promise<void> => {
      if (!loaded) {
        loaded = start().then(async () => {
          await lease.real?.blackboard.whenLoaded;
        });
        // A failed load is reported through onError; a caller that never awaits whenLoaded must not get an unhandled rejection.
        loaded.catch(() => (loaded = null));
      }
      return loaded;
    };
    void whenLoaded();

    /** Writes grouped by transact(): one replay, one report to listeners. */
    let batch: { replays: Replay[]; changed: Set<string> } | null = null;
    const assertOpen = () => {
      if (lease.released) throw new TabulaError('storage/closed', `The blackboard of session "${sessionId}" is closed; open the session again.`);
    };
    const board = (): Blackboard | null => lease.real?.blackboard ?? null;
    const report = (changed: Iterable<string>) => {
      const keys = [...changed].sort();
      for (const other of shared.leases) {
        for (const { listener } of [...other.listeners]) {
          const changes = keys.map((k2) => {
            const value = shared.values.get(k2);
            return Object.freeze({ key: k2, value: value === undefined ? undefined : cloneJson(value), origin: 'local' as const });
          });
          try {
            listener(changes);
          } catch (error) {
            registryOptions.onError(
              new TabulaError('argument/invalid', `A blackboard observe() listener of session "${sessionId}" threw; the change was applied and the other listeners were called.`, { cause: error }),
            );
          }
        }
      }
    };
    const write = (replay: Replay, changed: string[]) => {
      // An empty update() or transaction changes nothing: as in Yjs, nothing to store or report.
      if (changed.length === 0) return;
      if (batch) {
        batch.replays.push(replay);
        for (const k2 of changed) batch.changed.add(k2);
        return;
      }
      shared.replays.push(replay);
      report(changed);
    };
    const set = (k2: string, copy: JsonValue) => shared.values.set(k2, copy);

    const blackboard: Blackboard = {
      get doc() {
        const ready = board();
        if (ready) return ready.doc;
        throw new TabulaError('blackboard/loading', `The Y.Doc of session "${sessionId}"'s blackboard is there once \`await session.blackboard.whenLoaded\` has resolved (Yjs loads on the board's first use).`);
      },
      get whenLoaded() {
        return whenLoaded();
      },
      async flushed() {
        // start(), not the first load: after a load that failed, this tries again (as the next acquire would).
        await start();
        if (lease.real) return lease.real.blackboard.flushed();
        // Only a lease released before the code came has no board (connect() made its writes durable).
        assertOpen();
      },
      get(k2) {
        const ready = board();
        if (ready) return ready.get(k2);
        const value = shared.values.get(checkKey(k2));
        return value === undefined ? undefined : cloneJson(value);
      },
      has(k2) {
        return board()?.has(k2) ?? shared.values.has(checkKey(k2));
      },
      keys() {
        return board()?.keys() ?? [...shared.values.keys()].sort();
      },
      toJSON() {
        const ready = board();
        if (ready) return ready.toJSON();
        const out: Record<string, JsonValue> = {};
        for (const k2 of [...shared.values.keys()].sort()) out[k2] = cloneJson(shared.values.get(k2) as JsonValue);
        return out;
      },
      set(k2, value) {
        const ready = board();
        if (ready) return ready.set(k2, value);
        assertOpen();
        const copy = checkValue(checkKey(k2), value);
        set(k2, copy);
        write((b) => b.set(k2, copy), [k2]);
      },
      delete(k2) {
        const ready = board();
        if (ready) return ready.delete(k2);
        assertOpen();
        checkKey(k2);
        // As in Yjs: deleting a key that is not there changes nothing and reports nothing.
        if (!shared.values.delete(k2)) return;
        write((b) => b.delete(k2), [k2]);
      },
      update(values) {
        const ready = board();
        if (ready) return ready.update(values);
        assertOpen();
        const entries = checkEntries(values);
        for (const [k2, copy] of entries) set(k2, copy);
        write((b) => b.update(Object.fromEntries(entries)), entries.map(([k2]) => k2));
      },
      transact(fn) {
        const ready = board();
        if (ready) return ready.transact(fn);
        assertOpen();
        checkFunction(fn, 'transact');
        if (batch) return fn();
        const current: { replays: Replay[]; changed: Set<string> } = { replays: [], changed: new Set() };
        batch = current;
        try {
          fn();
        } finally {
          // As a Yjs transaction: what fn did before it threw stays, and is reported once.
          batch = null;
          write((b) => b.transact(() => current.replays.forEach((replay) => replay(b))), [...current.changed]);
        }
      },
      observe(listener) {
        const ready = board();
        if (ready) return ready.observe(listener);
        assertOpen();
        checkFunction(listener, 'observe');
        const entry = { listener, stop: () => void lease.listeners.delete(entry) };
        lease.listeners.add(entry);
        return () => entry.stop();
      },
    };

    return {
      blackboard,
      // Idempotent: every step is. Released before the code came, it resolves once the load has stored
      // what was written to the board (connect()).
      async release() {
        lease.released = true;
        lease.listeners.clear();
        await loading?.catch(() => undefined);
        await lease.real?.release();
      },
    };
  };

  const destroy = async (userId: string, sessionId: string, life: string | undefined): Promise<void> => {
    if (loading) return (await start()).destroy(userId, sessionId, life);
    // No board was ever opened in this tab: tell the others and delete the database, without Yjs.
    if (life === undefined) return;
    if (typeof BroadcastChannel === 'function') {
      const channel = new BroadcastChannel(livesChannelName(registryOptions.name));
      channel.postMessage({ v: 1, userId, sessionId, life } satisfies LifeEnded);
      channel.close();
    }
    await deleteDocDatabase(blackboardDatabaseName(registryOptions.name, userId, sessionId, life));
  };

  return {
    acquire: (userId, sessionId, life) => (real ? real.acquire(userId, sessionId, life) : standIn(userId, sessionId, life)),
    destroy,
    async prune(userId, sessionId, keep) {
      if (loading) return (await start()).prune(userId, sessionId, keep);
      for (const life of await boardLivesOnDisk(registryOptions.name, userId, sessionId)) if (life !== keep) await destroy(userId, sessionId, life);
    },
    // Before the code loaded, no board is open in this tab (stand-ins hold no life).
    openLife: (userId, sessionId) => real?.openLife(userId, sessionId),
    // A board never opened in this tab and with nothing stored has nothing to say: no Yjs for that.
    async boardSeen(userId, sessionId, life) {
      if (!loading && (await readBoardUpdates(blackboardDatabaseName(registryOptions.name, userId, sessionId, life))).length === 0) return EMPTY_BOARD_SEEN;
      return (await start()).boardSeen(userId, sessionId, life);
    },
    async unseenKeys(userId, sessionId, life, seen) {
      if (!loading && (await readBoardUpdates(blackboardDatabaseName(registryOptions.name, userId, sessionId, life))).length === 0) return [];
      return (await start()).unseenKeys(userId, sessionId, life, seen);
    },
    // A load that failed left nothing open.
    close: async () => loading?.then((registry) => registry.close(), () => undefined),
  };
}
