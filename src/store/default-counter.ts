/**
 * The token counter an `openTabula()` makes when the app passes none: the
 * worker counter (o200k_base, shared worker), whose code (Comlink, the
 * engine, the cache) is loaded by a dynamic import on the first count, so
 * a page that never counts tokens never downloads it. The counter itself
 * already starts its worker only on the first count (tokens/counter.ts).
 */
import type { Message } from '../core/message.js';
import type { TokenCounter, TokenMeasure } from '../core/tokens.js';
import type { WorkerTokenCounter } from '../tokens/counter.js';

/** A TokenCounter with `close()`, for the counter a Tabula owns. */
export interface OwnedTokenCounter extends TokenCounter {
  close(): void;
}

/** The o200k_base shared-worker counter, loaded on first use. */
export function lazyWorkerCounter(): OwnedTokenCounter {
  let loading: Promise<WorkerTokenCounter> | null = null;
  let closed = false;
  const counter = () =>
    (loading ??= import('../tokens/counter.js').then(({ createTokenCounter }) => {
      const made = createTokenCounter({ encoding: 'o200k_base', worker: 'shared' });
      // Closed while the code loaded: the counter is closed too, so a count after close() refuses as before.
      if (closed) made.close();
      return made;
    }));
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
