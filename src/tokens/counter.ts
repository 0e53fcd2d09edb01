/**
 * `createTokenCounter()`: exact token counts for a model's tokenizer that
 * never block the page. This module measures with the cache; where the
 * tokenizer runs (a SharedWorker, a dedicated Worker or the calling thread,
 * Comlink carrying the calls) is backend.ts, and the argument checks are
 * arguments.ts.
 *
 * - Nothing starts until the first count: creating a counter fetches no
 *   worker script and no encoding (an app that never counts never pays).
 * - Counts are exact, or say they are not: a request past its time budget
 *   resolves the chars/4 estimate with `exact: false` (measureText,
 *   measureEach); estimates are never cached, so the next call counts again.
 *
 * - Counts are cached per text (LRU, texts under 256 KB), so counting a session after one
 *   append sends one message to the worker; only uncached texts are sent,
 *   in one call per count().
 * - If the worker cannot start (CSP, a bundler that did not emit the
 *   worker file, an old browser) the counter falls back to the calling
 *   thread and says so through `mode`; it never throws for that.
 * - Each worker request has a time budget; past it a dedicated worker is
 *   terminated and restarted and that call returns the estimate, marked
 *   `exact: false` by measureText().
 */
import * as Comlink from 'comlink';
import { TabulaError } from '../core/errors.js';
import type { Message } from '../core/message.js';
import { estimateTextTokens, messageFixedTokens, type TokenCounter, type TokenMeasure } from '../core/tokens.js';
import { checkCountOptions, checkCounterOptions, checkedCount, describe, tokenTexts } from './arguments.js';
import { startBackend, withBudget, type Backend, type CounterMode } from './backend.js';
import { CountCache, textKey } from './cache.js';
import type { Encoding } from './engine.js';

/** Options of {@link createTokenCounter}; every field is optional. */
export interface TokenCounterOptions {
  /** @default 'o200k_base' (GPT-4o and later) */
  encoding?: Encoding;
  /** Which worker to try first; 'none' counts in the calling thread. @default 'shared' */
  worker?: 'shared' | 'dedicated' | 'none';
  /**
   * Time budget of one request: in a worker, this plus 2 ms per 1,000
   * characters (the transfer); in the calling thread, this alone, checked
   * between windows of 64K characters. Past it the call resolves the
   * estimate, marked `exact: false`. @default 10_000
   */
  requestTimeoutMs?: number;
  /** How long the worker may take to start and load its encoding before the counter falls back. @default 15_000 */
  startTimeoutMs?: number;
  /** Entries of the per-text count cache. @default 50_000 */
  cacheSize?: number;
  /**
   * The worker script to start instead of the bundled one, for bundlers
   * that do not emit `new Worker(new URL('…', import.meta.url))` (esbuild):
   * a bundle of `tabula-sdk/token-worker/o200k_base` (or `/cl100k_base`,
   * matching `encoding`); the same script serves as a Worker and a SharedWorker.
   */
  workerUrl?: string | URL;
}

/** Options of `countText()` and `measureText()`. */
export interface CountTextOptions {
  /** Called as windows are counted, with characters done and in all. */
  onProgress?: (doneChars: number, totalChars: number) => void;
  /** Aborts the count; the promise rejects with code 'tokens/aborted'. */
  signal?: AbortSignal;
}

/** A TokenCounter backed by gpt-tokenizer, off the main thread where possible. */
export interface WorkerTokenCounter extends TokenCounter {
  /** The encoding; cached counts are keyed by it. */
  readonly name: Encoding;
  /** Where the tokenizer runs now (before the first count: where it will be tried first). */
  readonly mode: CounterMode;
  /** Starts the counter if it has not started; resolves with the mode once the encoding is loaded. */
  readonly ready: Promise<CounterMode>;
  /** Why the counter fell back to the calling thread, or null. */
  readonly fallbackReason: string | null;
  count(messages: readonly Message[]): Promise<number>;
  countEach(messages: readonly Message[]): Promise<number[]>;
  /** Like countEach, saying per message whether its count is exact or the estimate a timeout fell back to. */
  measureEach(messages: readonly Message[]): Promise<TokenMeasure[]>;
  /** Tokens of one text (in windows, with progress and cancellation for large texts). */
  countText(text: string, options?: CountTextOptions): Promise<number>;
  /** Like countText, saying whether the number is exact or the estimate a timeout fell back to. */
  measureText(text: string, options?: CountTextOptions): Promise<TokenMeasure>;
  /** How many texts were sent to the tokenizer, answered from the cache, or estimated. */
  stats(): { counted: number; cached: number; estimated: number };
  /**
   * Releases the worker (a dedicated one is terminated, a shared one keeps serving the other tabs);
   * every count after it rejects with `storage/closed`. A second close does nothing.
   */
  close(): void;
}

const LARGE_TEXT_CHARS = 256 * 1024;

/** What a request that gave no count resolves: its budget ran out, or the worker failed. The caller estimates. */
const UNANSWERED = Symbol('unanswered');

/**
 * Creates a token counter. It starts nothing: the worker (and its encoding)
 * starts on the first count, and a worker that fails falls back to the
 * calling thread without throwing.
 */
export function createTokenCounter(options: TokenCounterOptions = {}): WorkerTokenCounter {
  const { encoding, preference } = checkCounterOptions(options);
  const { workerUrl } = options;
  const requestTimeoutMs: number = options.requestTimeoutMs ?? 10_000;
  const startTimeoutMs: number = options.startTimeoutMs ?? 15_000;
  const cache = new CountCache(options.cacheSize ?? 50_000);
  let fallbackReason: string | null = null;
  const totals = { counted: 0, cached: 0, estimated: 0 };
  let closed = false;
  let requestSeq = 0;
  // Checked before the cache is read too: a closed counter answers nothing, not even what it remembers.
  const assertOpen = () => {
    if (closed) throw new TabulaError('storage/closed', 'This token counter is closed; create a new one.');
  };

  // Started on first use (see the module comment): no worker, no encoding before anyone counts.
  let backend: Promise<Backend> | null = null;
  let current: Backend | null = null;
  const started = (): Promise<Backend> => {
    if (!backend) {
      // Only loading the encoding into this thread can fail (a chunk fetch offline): that count fails,
      // and the next one tries again.
      const next = startBackend({ encoding, preference, workerUrl, startTimeoutMs, onFallback: (reason) => (fallbackReason = reason) }).catch((error: unknown) => {
        backend = null;
        throw new TabulaError('storage/failed', `Could not load the ${encoding} encoding into this thread; check that the bundle serves its chunk. The next count tries again.`, { cause: error });
      });
      backend = next;
      next.then(
        (b) => (current = b),
        () => undefined,
      );
    }
    return backend;
  };

  /**
   * Runs a request: in a worker under a timer (a stuck dedicated worker is restarted), in the
   * calling thread with the engine's own budget. UNANSWERED means: estimate.
   */
  const request = async <T>(run: (engine: Backend['engine'], inThreadBudgetMs: number | undefined) => Promise<T | null>, chars: number): Promise<T | typeof UNANSWERED> => {
    assertOpen();
    const b = await started();
    if (b.mode === 'in-thread') return (await run(b.engine, requestTimeoutMs)) ?? UNANSWERED;
    try {
      return (await withBudget(run(b.engine, undefined), requestTimeoutMs + chars / 500)) ?? UNANSWERED;
    } catch (error) {
      if (error instanceof Error && error.name === 'AbortError') throw error;
      // Only a dedicated worker can be cut short: a shared one serves other tabs too, so it is kept.
      if (b.mode === 'dedicated' && !closed && backend !== null) {
        b.dispose();
        backend = null;
      }
      return UNANSWERED;
    }
  };

  // Texts this large are not cached: hashing one costs ~8% of counting it, and they are rarely recounted.
  const cacheable = (text: string) => text.length < LARGE_TEXT_CHARS;

  const measureTexts = async (texts: string[]): Promise<TokenMeasure[]> => {
    assertOpen();
    const measures: TokenMeasure[] = [];
    const missing: number[] = [];
    texts.forEach((text, i) => {
      const hit = cacheable(text) ? cache.get(textKey(text)) : undefined;
      if (hit === undefined) missing.push(i);
      else measures[i] = { tokens: hit, exact: true };
    });
    totals.cached += texts.length - missing.length;
    if (missing.length === 0) return measures;
    const batch = missing.map((i) => texts[i] as string);
    const chars = batch.reduce((sum, text) => sum + text.length, 0);
    const result = await request((engine, budgetMs) => engine.countTexts(encoding, batch, budgetMs), chars);
    if (result === UNANSWERED) {
      // Estimates are answers for now, never cached: the next call counts again.
      missing.forEach((i) => (measures[i] = { tokens: estimateTextTokens(texts[i] as string), exact: false }));
      totals.estimated += missing.length;
      return measures;
    }
    // Every count is checked before any is cached or counted: a bad reply changes nothing.
    const counts = missing.map((_, k) => checkedCount(result[k]));
    totals.counted += missing.length;
    missing.forEach((i, k) => {
      const value = counts[k] as number;
      measures[i] = { tokens: value, exact: true };
      if (cacheable(texts[i] as string)) cache.set(textKey(texts[i] as string), value);
    });
    return measures;
  };

  const measureEach = async (messages: readonly Message[], method: string): Promise<TokenMeasure[]> => {
    const texts = tokenTexts(messages, method);
    const measures = await measureTexts(texts);
    return measures.map(({ tokens, exact }, i) => ({ tokens: tokens + messageFixedTokens(messages[i] as Message), exact }));
  };

  const measureText = async (text: string, opts: CountTextOptions | undefined, method: string): Promise<TokenMeasure> => {
    if (typeof text !== 'string') throw new TabulaError('argument/invalid', `counter.${method}() takes a string, got ${describe(text)}.`);
    const { signal, onProgress } = checkCountOptions(opts, method);
    if (signal?.aborted) throw new TabulaError('tokens/aborted', 'Counting was aborted before it started.', { cause: signal.reason });
    // Without progress, and without a signal to honour on a large text, there is nothing to interleave:
    // one call, no yields between windows.
    if (!onProgress && (!signal || text.length < LARGE_TEXT_CHARS)) {
      const [measure] = await measureTexts([text]);
      return measure as TokenMeasure;
    }
    const id = `c${++requestSeq}`;
    // The worker's progress calls travel on the callback's own channel, which may deliver after the
    // result: once the count is settled, late ones are dropped and the caller hears the end exactly once.
    // After the caller's abort too: the worker counts on until the cancel reaches it (on a loaded
    // machine, dozens of windows), and none of that is the caller's any more.
    let settled = false;
    let reported = 0;
    const report = (doneChars: number, totalChars: number) => {
      if (settled || signal?.aborted || !onProgress) return;
      reported = doneChars;
      onProgress(doneChars, totalChars);
    };
    const progress = onProgress ? Comlink.proxy(report) : undefined;
    const onAbort = () => {
      // A cancel that cannot be delivered (the worker is gone) has nothing left to stop.
      started()
        .then((b) => b.engine.cancel(id))
        .catch(() => undefined);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      // Comlink.proxy marks the callback for transfer and leaves it callable, so in-thread mode can use it as is.
      const result = await request((engine, budgetMs) => engine.countLarge(encoding, id, text, progress, budgetMs), text.length);
      if (result === UNANSWERED) {
        totals.estimated += 1;
        return { tokens: estimateTextTokens(text), exact: false };
      }
      const tokens = checkedCount(result);
      totals.counted += 1;
      if (reported < text.length) report(text.length, text.length);
      return { tokens, exact: true };
    } catch (error) {
      if (signal?.aborted) throw new TabulaError('tokens/aborted', 'Counting was aborted.', { cause: signal.reason });
      throw error;
    } finally {
      settled = true;
      signal?.removeEventListener('abort', onAbort);
    }
  };

  return {
    name: encoding,
    get mode() {
      return current?.mode ?? (preference === 'none' ? 'in-thread' : preference);
    },
    get ready() {
      return started().then((b) => b.mode);
    },
    get fallbackReason() {
      return fallbackReason;
    },
    async count(messages) {
      return (await measureEach(messages, 'count')).reduce((sum, m) => sum + m.tokens, 0);
    },
    async countEach(messages) {
      return (await measureEach(messages, 'countEach')).map((m) => m.tokens);
    },
    measureEach: (messages) => measureEach(messages, 'measureEach'),
    async countText(text, opts) {
      return (await measureText(text, opts, 'countText')).tokens;
    },
    measureText: (text, opts) => measureText(text, opts, 'measureText'),
    stats: () => ({ ...totals }),
    close() {
      if (closed) return;
      closed = true;
      backend?.then(
        (b) => b.dispose(),
        () => undefined,
      );
    },
  };
}
