/**
 * A live query: the latest result of an async read, re-read whenever its
 * source says something changed, in the shape `useSyncExternalStore` wants
 * (`subscribe` + a `getSnapshot` that returns the same object until the
 * data changes). Framework-free, so it is tested without React.
 *
 * The source is attached on the first subscriber and detached after the
 * last, so an unmounted component leaves no listener behind. Reads never
 * overlap: a change during a read schedules one more read after it.
 */

/** What a live query holds: nothing yet, data, or the error of the last read. */
export type QueryState<T> =
  | { readonly status: 'loading' }
  | { readonly status: 'ready'; readonly data: T }
  | { readonly status: 'error'; readonly error: unknown };

/** A query's state as `useSyncExternalStore` reads it: built by {@link createLiveQuery}. */
export interface LiveQuery<T> {
  /** Starts listening (the first subscriber attaches the source); returns the unsubscribe function. */
  readonly subscribe: (onChange: () => void) => () => void;
  /** The current state; the same object until it changes. */
  readonly getSnapshot: () => QueryState<T>;
}

const LOADING = Object.freeze({ status: 'loading' as const });

/**
 * `source(onChange)` starts listening and returns the function that stops
 * it; `read()` fetches the current data.
 */
export function createLiveQuery<T>(source: (onChange: () => void) => () => void, read: () => Promise<T>): LiveQuery<T> {
  let state: QueryState<T> = LOADING;
  const listeners = new Set<() => void>();
  let detach: (() => void) | null = null;
  let reading = false;
  let stale = false;

  const refresh = (): void => {
    if (reading) {
      stale = true;
      return;
    }
    reading = true;
    stale = false;
    read()
      .then(
        (data) => {
          state = { status: 'ready', data };
        },
        (error: unknown) => {
          state = { status: 'error', error };
        },
      )
      .finally(() => {
        reading = false;
        for (const listener of [...listeners]) listener();
        if (stale && detach) refresh();
      });
  };

  return {
    subscribe(onChange) {
      listeners.add(onChange);
      if (!detach) {
        detach = source(refresh);
        refresh();
      }
      return () => {
        listeners.delete(onChange);
        if (listeners.size === 0 && detach) {
          detach();
          detach = null;
        }
      };
    },
    getSnapshot: () => state,
  };
}
