/**
 * The token counter an `openTabula()` makes when the app passes none: the
 * worker counter (o200k_base, shared worker), whose code (Comlink, the
 * engine, the cache) is loaded by a dynamic import on the first count, so
 * a page that never counts tokens never downloads it. The counter itself
 * already starts its worker only on the first count (tokens/counter.ts).
 */
import { TabulaError } from '../core/errors.js';
import type { Message } from '../core/message.js';
import type { TokenCounter, TokenMeasure } from '../core/tokens.js';
import type { TokenCounterOptions, WorkerTokenCounter } from '../tokens/counter.js';

/** A TokenCounter with `close()`, for the counter a Tabula owns. */
export interface OwnedTokenCounter extends TokenCounter {
  close(): void;
}

/** The module with the worker counter in it; a test passes its own to make the load fail. */
export type CounterCode = () => Promise<{ createTokenCounter: (options: TokenCounterOptions) => WorkerTokenCounter }>;

const defaultLoad: CounterCode = () => import('../tokens/counter.js');

/** The o200k_base shared-worker counter, loaded on first use. */
export function lazyWorkerCounter(load: CounterCode = defaultLoad): OwnedTokenCounter {
  let loading: Promise<WorkerTokenCounter> | null = null;
  let closed = false;
  const counter = () =>
    (loading ??= load().then(
      ({ createTokenCounter }) => {
        const made = createTokenCounter({ encoding: 'o200k_base', worker: 'shared' });
        // Closed while the code loaded: the counter is closed too, so a count after close() refuses as before.
        if (closed) made.close();
        return made;
      },
      (error: unknown) => {
        // A chunk fetch may fail once offline: this count fails, the next one loads again.
        loading = null;
        throw new TabulaError('storage/failed', 'Could not load the token counter code; check that the bundle serves its lazy chunk. The next count tries again.', { cause: error });
      },
    ));
  return {
    name: 'o200k_base',
    count: async (messages: readonly Message[]) => (await counter()).count(messages),
    countEach: async (messages: readonly Message[]) => (await counter()).countEach(messages),
    measureEach: async (messages: readonly Message[]): Promise<TokenMeasure[]> => (await counter()).measureEach(messages),
    close() {
      closed = true;
      loading?.then((made) => made.close()).catch(() => undefined);
    },
  };
}
