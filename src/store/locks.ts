/**
 * Exclusive named locks: the browser's Web Locks where they exist (held
 * across every tab of the origin and released when a tab closes or
 * crashes), and otherwise an in-process manager with the same contract for
 * one process (Node, tests, old browsers).
 *
 * The in-process manager lives on `globalThis` under a registered symbol on
 * purpose: like Web Locks, it must be shared by every Tabula instance in
 * the process, or two instances could run the same session at once.
 */

/** The part of the Web Locks API that Tabula uses. */
export interface Locks {
  /**
   * Runs `callback` while holding the exclusive lock `name`. With
   * `ifAvailable` the callback gets null at once when the lock is held;
   * `signal` aborts a request that is still waiting, and refuses one made
   * after it was aborted, whether the lock is free or held.
   */
  request<T>(name: string, options: { ifAvailable?: boolean; signal?: AbortSignal }, callback: (lock: { name: string } | null) => Promise<T>): Promise<T>;
  /** Names of the locks held right now. */
  held(): Promise<string[]>;
}

interface Waiter {
  grant: () => void;
}

interface LocalState {
  held: Set<string>;
  queues: Map<string, Waiter[]>;
}

const LOCAL_KEY = Symbol.for('tabula.local-locks');

function localState(): LocalState {
  const holder = globalThis as { [LOCAL_KEY]?: LocalState };
  holder[LOCAL_KEY] ??= { held: new Set(), queues: new Map() };
  return holder[LOCAL_KEY];
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The lock request was aborted.', 'AbortError');
}

/** The in-process lock manager (exported for tests). */
export function localLocks(): Locks {
  const state = localState();

  const release = (name: string) => {
    const queue = state.queues.get(name);
    const next = queue?.shift();
    if (queue && queue.length === 0) state.queues.delete(name);
    if (next) next.grant();
    else state.held.delete(name);
  };

  return {
    async request(name, options, callback) {
      // Checked first, as Web Locks does: a waiter added with a signal already aborted would never hear its 'abort'.
      if (options.signal?.aborted) throw abortError(options.signal);
      if (state.held.has(name)) {
        if (options.ifAvailable) return callback(null);
        await new Promise<void>((resolve, reject) => {
          const waiter: Waiter = { grant: resolve };
          const queue = state.queues.get(name) ?? [];
          queue.push(waiter);
          state.queues.set(name, queue);
          options.signal?.addEventListener(
            'abort',
            () => {
              const index = queue.indexOf(waiter);
              if (index === -1) return;
              queue.splice(index, 1);
              reject(abortError(options.signal as AbortSignal));
            },
            { once: true },
          );
        });
        // Granted by release(): the lock passed straight to us and stays in `held`.
      } else {
        state.held.add(name);
      }
      try {
        return await callback({ name });
      } finally {
        release(name);
      }
    },
    held() {
      return Promise.resolve([...state.held]);
    },
  };
}

/**
 * Web Locks takes only this realm's AbortSignal (a TypeError otherwise), while run() accepts any signal
 * with `aborted` and `addEventListener` (another realm's, a library's): such a one is followed by ours.
 */
function thisRealmSignal(signal: Pick<AbortSignal, 'aborted' | 'reason' | 'addEventListener'>): AbortSignal {
  if (signal instanceof AbortSignal) return signal;
  const controller = new AbortController();
  if (signal.aborted) controller.abort(signal.reason);
  // 'abort' fires once: no { once: true } needed.
  else signal.addEventListener('abort', () => controller.abort(signal.reason));
  return controller.signal;
}

/** Web Locks when the platform has them, else the in-process manager. */
export function platformLocks(): Locks {
  const manager = typeof navigator === 'object' ? (navigator as Navigator & { locks?: LockManager }).locks : undefined;
  if (!manager) return localLocks();
  return {
    async request<T>(name: string, options: { ifAvailable?: boolean; signal?: AbortSignal }, callback: (lock: { name: string } | null) => Promise<T>): Promise<T> {
      const { ifAvailable, signal } = options;
      // Web Locks refuses `signal` with `ifAvailable` (NotSupportedError). A request that never waits has
      // nothing for a signal to cancel, so only an abort that came before it counts, as in localLocks().
      if (ifAvailable && signal?.aborted) throw abortError(signal);
      // The DOM typing unwraps the callback's promise one level too many; the value is the callback's.
      return (await manager.request(
        name,
        { mode: 'exclusive', ...(ifAvailable ? { ifAvailable } : signal ? { signal: thisRealmSignal(signal) } : {}) },
        (lock) => callback(lock ? { name: lock.name } : null),
      ));
    },
    async held() {
      const snapshot = await manager.query();
      return (snapshot.held ?? []).map((lock) => lock.name ?? '').filter((name) => name !== '');
    },
  };
}
