/**
 * The counting engine: gpt-tokenizer behind a small API that runs the same
 * in a Web Worker, a SharedWorker or the page's own thread.
 *
 * Which encodings an engine can load is decided by whoever builds it: a
 * worker entry imports its one encoding statically (so a bundler puts
 * exactly that encoding in that worker file, whatever its worker format),
 * and the calling thread loads the encoding asked for with a dynamic import
 * (in-thread-encodings.ts). This module imports no encoding itself: a
 * dynamic import here would pull every encoding into every worker bundled
 * as iife.
 *
 * Special-token strings in user text (`<|endoftext|>`) are counted as the
 * text they are, never treated as control tokens: gpt-tokenizer throws on
 * them by default.
 */
import { exactCounterOf } from './bpe.js';

/** The encodings Tabula counts with. */
export type Encoding = 'o200k_base' | 'cl100k_base';
export const ENCODINGS: readonly Encoding[] = ['o200k_base', 'cl100k_base'];

/** What a `gpt-tokenizer/encoding/<name>` module provides that the engine uses. */
export interface EncodingModule {
  countTokens: (text: string, options: { disallowedSpecial: Set<string> }) => number;
  default?: unknown;
}

/** Where an engine gets each encoding it may count with. */
export type EncodingLoaders = Partial<Record<Encoding, () => Promise<EncodingModule>>>;

/** Characters counted between two yields (progress, cancellation, the time budget). */
export const WINDOW_CHARS = 64 * 1024;

/** What a worker exposes (through Comlink) and what in-thread mode calls directly. */
export interface CountingEngine {
  /** Loads an encoding; resolves when it is ready to count. */
  load(encoding: Encoding): Promise<void>;
  /**
   * Tokens of each text, in one call. With `budgetMs`, counting yields to
   * the event loop between windows and gives up once the budget is spent,
   * resolving null (the calling thread's guard against freezing the page).
   */
  countTexts(encoding: Encoding, texts: string[], budgetMs?: number): Promise<number[] | null>;
  /**
   * Tokens of one large text, window by window, yielding between windows so
   * a cancel() can get through; reports progress in characters. Resolves
   * null once `budgetMs` (if given) is spent.
   */
  countLarge(encoding: Encoding, requestId: string, text: string, onProgress?: (doneChars: number, totalChars: number) => void, budgetMs?: number): Promise<number | null>;
  /** Stops this connection's countLarge() `requestId`; it rejects with an Error named 'AbortError'. */
  cancel(requestId: string): void;
}

/** Loaded encodings shared by every connection of a worker; each connection gets its own engine. */
export interface EngineHost {
  /** An engine for one caller: its request ids and cancels are its own. */
  connect(): CountingEngine;
}

/**
 * Lets queued messages (a cancel) run between windows. A MessageChannel
 * round trip, not setTimeout(0): nested timeouts are clamped to 4 ms, which
 * cost a 5 MB count 80 windows × 4 ms.
 */
const yieldToEvents = () =>
  new Promise<void>((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });

interface Counter {
  /** Tokens from `start` up to a pre-token boundary at least `minChars` later (or the end), and where it stopped. */
  window(text: string, start: number, minChars: number): { tokens: number; end: number };
}

/** A counter for one loaded encoding module: the exact fast path, else gpt-tokenizer's countTokens on the whole text. */
function counterOf(module: EncodingModule): Counter {
  const exact = exactCounterOf(module.default);
  if (exact) return { window: (text, start, minChars) => exact.countWindow(text, start, minChars) };
  const none = new Set<string>();
  // Without the encoder's internals no cut point is known to be safe: one window, the whole rest.
  return { window: (text, start) => ({ tokens: module.countTokens(start === 0 ? text : text.slice(start), { disallowedSpecial: none }), end: text.length }) };
}

function abortError(requestId: string): Error {
  const error = new Error(`Counting request ${requestId} was cancelled.`);
  error.name = 'AbortError';
  return error;
}

/** A host for the encodings `loaders` can load. */
export function createEngineHost(loaders: EncodingLoaders): EngineHost {
  const loaded = new Map<Encoding, Promise<Counter>>();
  const counter = (encoding: Encoding): Promise<Counter> => {
    let ready = loaded.get(encoding);
    if (!ready) {
      const load = loaders[encoding];
      const loading = load ? load().then(counterOf) : Promise.reject(new Error(`This token worker does not hold the encoding ${encoding}.`));
      // A failed load (a chunk fetch offline) is not kept: the next request loads again.
      loading.catch(() => loaded.delete(encoding));
      loaded.set(encoding, (ready = loading));
    }
    return ready;
  };

  return {
    connect() {
      // Only requests in flight can be cancelled: a cancel that crosses its request's answer would
      // otherwise stay in the set for good, and stop a later request that reuses the id.
      const running = new Set<string>();
      const cancelled = new Set<string>();
      return {
        async load(encoding) {
          await counter(encoding);
        },
        async countTexts(encoding, texts, budgetMs) {
          const count = await counter(encoding);
          const started = performance.now();
          const counts: number[] = [];
          for (const text of texts) {
            let total = 0;
            let at = 0;
            do {
              const { tokens, end } = count.window(text, at, budgetMs === undefined ? Infinity : WINDOW_CHARS);
              total += tokens;
              at = end;
              if (budgetMs !== undefined && at < text.length) {
                if (performance.now() - started >= budgetMs) return null;
                await yieldToEvents();
              }
            } while (at < text.length);
            counts.push(total);
          }
          return counts;
        },
        async countLarge(encoding, requestId, text, onProgress, budgetMs) {
          running.add(requestId);
          try {
            const count = await counter(encoding);
            const started = performance.now();
            let total = 0;
            let at = 0;
            do {
              if (cancelled.has(requestId)) throw abortError(requestId);
              const { tokens, end } = count.window(text, at, WINDOW_CHARS);
              total += tokens;
              at = end;
              onProgress?.(at, text.length);
              if (at < text.length) {
                if (budgetMs !== undefined && performance.now() - started >= budgetMs) return null;
                await yieldToEvents();
              }
            } while (at < text.length);
            return total;
          } finally {
            running.delete(requestId);
            cancelled.delete(requestId);
          }
        },
        cancel(requestId) {
          if (running.has(requestId)) cancelled.add(requestId);
        },
      };
    },
  };
}

/** One engine over the encodings `loaders` can load (the dedicated worker's and the calling thread's). */
export function createEngine(loaders: EncodingLoaders): CountingEngine {
  return createEngineHost(loaders).connect();
}
