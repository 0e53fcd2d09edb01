/**
 * `createTokenCounter()`: exact token counts for a model's tokenizer that
 * never block the page. The tokenizer runs in a SharedWorker when the
 * browser has one (one loaded encoding for every tab), else in a dedicated
 * Worker, else in the calling thread; Comlink carries the calls.
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
import { estimateTextTokens, messageFixedTokens, messageTokenText, type TokenCounter } from '../core/tokens.js';
import { CountCache, textKey } from './cache.js';
import { ENCODINGS, createEngine, type CountingEngine, type Encoding } from './engine.js';

/** Where the tokenizer actually runs. */
export type CounterMode = 'shared' | 'dedicated' | 'in-thread';

export interface TokenCounterOptions {
  /** @default 'o200k_base' (GPT-4o and later) */
  encoding?: Encoding;
  /** Which worker to try first; 'none' counts in the calling thread. @default 'shared' */
  worker?: 'shared' | 'dedicated' | 'none';
  /** Time budget of one worker request, plus 2 ms per 1,000 characters. @default 10_000 */
  requestTimeoutMs?: number;
  /** How long the worker may take to start and load its encoding before the counter falls back. @default 15_000 */
  startTimeoutMs?: number;
  /** Entries of the per-text count cache. @default 50_000 */
  cacheSize?: number;
  /** Overrides the worker script (for bundlers that need it elsewhere). */
  workerUrl?: string | URL;
}

export interface CountTextOptions {
  /** Called as chunks are counted, with characters done and in all. */
  onProgress?: (doneChars: number, totalChars: number) => void;
  /** Aborts the count; the promise rejects with code 'tokens/aborted'. */
  signal?: AbortSignal;
}

/** A TokenCounter backed by gpt-tokenizer, off the main thread where possible. */
export interface WorkerTokenCounter extends TokenCounter {
  /** The encoding; cached counts are keyed by it. */
  readonly name: Encoding;
  /** Where the tokenizer runs now. */
  readonly mode: CounterMode;
  /** Resolves with the mode once the encoding is loaded and counting is exact. */
  readonly ready: Promise<CounterMode>;
  /** Why the counter fell back to the calling thread, or null. */
  readonly fallbackReason: string | null;
  count(messages: readonly Message[]): Promise<number>;
  countEach(messages: readonly Message[]): Promise<number[]>;
  /** Tokens of one text (chunked, with progress and cancellation for large texts). */
  countText(text: string, options?: CountTextOptions): Promise<number>;
  /** Like countText, saying whether the number is exact or the estimate a timeout fell back to. */
  measureText(text: string, options?: CountTextOptions): Promise<{ tokens: number; exact: boolean }>;
  /** How many texts were sent to the tokenizer and how many were answered from the cache. */
  stats(): { counted: number; cached: number; estimated: number };
  close(): void;
}

interface Backend {
  readonly mode: CounterMode;
  readonly engine: CountingEngine | Comlink.Remote<CountingEngine>;
  /** Whether a stuck request can be cut short by restarting the backend. */
  readonly restartable: boolean;
  dispose(): void;
}

const LARGE_TEXT_CHARS = 256 * 1024;

class BudgetExceeded extends Error {}

function withBudget<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BudgetExceeded(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

function startDedicated(url: string | URL | undefined): { backend: Backend; failed: Promise<never> } {
  // The literal `new Worker(new URL('./worker.js', import.meta.url), …)` is what Vite and webpack look for.
  const worker = url === undefined ? new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'tabula-tokens' }) : new Worker(url, { type: 'module', name: 'tabula-tokens' });
  const failed = new Promise<never>((_, reject) => {
    worker.addEventListener('error', (event) => reject(new Error(event.message || 'the worker script failed to load')), { once: true });
  });
  const engine = Comlink.wrap<CountingEngine>(worker);
  return {
    failed,
    backend: {
      mode: 'dedicated',
      engine,
      restartable: true,
      dispose: () => {
        engine[Comlink.releaseProxy]();
        worker.terminate();
      },
    },
  };
}

function startShared(url: string | URL | undefined): { backend: Backend; failed: Promise<never> } {
  const worker = url === undefined ? new SharedWorker(new URL('./shared-worker.js', import.meta.url), { type: 'module', name: 'tabula-tokens' }) : new SharedWorker(url, { type: 'module', name: 'tabula-tokens' });
  const failed = new Promise<never>((_, reject) => {
    worker.addEventListener('error', () => reject(new Error('the shared worker script failed to load')), { once: true });
  });
  const engine = Comlink.wrap<CountingEngine>(worker.port);
  return {
    failed,
    backend: {
      mode: 'shared',
      engine,
      // Other tabs use the same worker; it cannot be terminated from here.
      restartable: false,
      dispose: () => {
        engine[Comlink.releaseProxy]();
        worker.port.close();
      },
    },
  };
}

function inThread(): Backend {
  return { mode: 'in-thread', engine: createEngine(), restartable: false, dispose: () => undefined };
}

/** Creates a token counter; it starts its worker at once and never throws for a worker that fails. */
export function createTokenCounter(options: TokenCounterOptions = {}): WorkerTokenCounter {
  const encoding = options.encoding ?? 'o200k_base';
  if (!ENCODINGS.includes(encoding)) {
    throw new TabulaError('argument/invalid', `createTokenCounter: encoding must be one of ${ENCODINGS.join(', ')}, got ${JSON.stringify(encoding)}.`);
  }
  const preference = options.worker ?? 'shared';
  if (!['shared', 'dedicated', 'none'].includes(preference)) {
    throw new TabulaError('argument/invalid', `createTokenCounter: worker must be 'shared', 'dedicated' or 'none', got ${JSON.stringify(preference)}.`);
  }
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  const startTimeoutMs = options.startTimeoutMs ?? 15_000;
  const cache = new CountCache(options.cacheSize ?? 50_000);
  let fallbackReason: string | null = null;
  const totals = { counted: 0, cached: 0, estimated: 0 };
  let closed = false;
  let requestSeq = 0;

  const start = async (): Promise<Backend> => {
    const attempts: ('shared' | 'dedicated')[] = [];
    if (preference === 'shared') attempts.push('shared', 'dedicated');
    if (preference === 'dedicated') attempts.push('dedicated');
    const reasons: string[] = [];
    for (const kind of attempts) {
      if (kind === 'shared' && typeof SharedWorker !== 'function') {
        reasons.push('SharedWorker is not available');
        continue;
      }
      if (kind === 'dedicated' && typeof Worker !== 'function') {
        reasons.push('Worker is not available');
        continue;
      }
      let started: ReturnType<typeof startDedicated> | undefined;
      try {
        started = kind === 'shared' ? startShared(options.workerUrl) : startDedicated(options.workerUrl);
        await withBudget(Promise.race([started.backend.engine.load(encoding), started.failed]), startTimeoutMs);
        return started.backend;
      } catch (error) {
        started?.backend.dispose();
        reasons.push(`${kind} worker: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (attempts.length > 0) fallbackReason = reasons.join('; ');
    const local = inThread();
    await local.engine.load(encoding);
    return local;
  };

  let backend: Promise<Backend> = start();
  let current: Backend | null = null;
  const ready = backend.then((b) => {
    current = b;
    return b.mode;
  });

  /** Runs a request against the backend, restarting a stuck dedicated worker. */
  const request = async <T>(run: (engine: Backend['engine']) => Promise<T>, budgetMs: number): Promise<T | BudgetExceeded> => {
    if (closed) throw new TabulaError('storage/closed', 'This token counter is closed; create a new one.');
    const b = await backend;
    if (b.mode === 'in-thread') return run(b.engine);
    try {
      return await withBudget(run(b.engine), budgetMs);
    } catch (error) {
      if (!(error instanceof BudgetExceeded)) throw error;
      if (b.restartable && !closed) {
        b.dispose();
        backend = start();
        void backend.then((next) => (current = next));
      }
      return error;
    }
  };

  const budgetFor = (chars: number) => requestTimeoutMs + chars / 500;

  // Texts this large are not cached: hashing one costs ~8% of counting it, and they are rarely recounted.
  const cacheable = (text: string) => text.length < LARGE_TEXT_CHARS;

  const countTexts = async (texts: string[]): Promise<{ counts: number[]; exact: boolean }> => {
    const counts = new Array<number>(texts.length);
    const missing: number[] = [];
    texts.forEach((text, i) => {
      const hit = cacheable(text) ? cache.get(textKey(text)) : undefined;
      if (hit === undefined) missing.push(i);
      else counts[i] = hit;
    });
    totals.cached += texts.length - missing.length;
    if (missing.length === 0) return { counts, exact: true };
    const batch = missing.map((i) => texts[i] as string);
    const chars = batch.reduce((sum, text) => sum + text.length, 0);
    const result = await request((engine) => engine.countTexts(encoding, batch), budgetFor(chars));
    if (result instanceof BudgetExceeded) {
      missing.forEach((i) => (counts[i] = estimateTextTokens(texts[i] as string)));
      totals.estimated += missing.length;
      return { counts, exact: false };
    }
    totals.counted += missing.length;
    missing.forEach((i, k) => {
      const value = result[k];
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
        throw new TabulaError('schema/invalid', `The token worker answered ${JSON.stringify(value)} for a text; expected a whole number ≥ 0.`);
      }
      counts[i] = value;
      if (cacheable(texts[i] as string)) cache.set(textKey(texts[i] as string), value);
    });
    return { counts, exact: true };
  };

  const countEach = async (messages: readonly Message[]): Promise<number[]> => {
    const { counts } = await countTexts(messages.map(messageTokenText));
    return counts.map((tokens, i) => tokens + messageFixedTokens(messages[i] as Message));
  };

  const measureText = async (text: string, opts: CountTextOptions = {}): Promise<{ tokens: number; exact: boolean }> => {
    if (typeof text !== 'string') throw new TabulaError('argument/invalid', `countText() takes a string, got ${typeof text}.`);
    const { signal, onProgress } = opts;
    if (signal?.aborted) throw new TabulaError('tokens/aborted', 'Counting was aborted before it started.', { cause: signal.reason });
    // Without progress, and without a signal to honour on a large text, there is nothing to interleave:
    // one call, no yields between chunks.
    if (!onProgress && (!signal || text.length < LARGE_TEXT_CHARS)) {
      const { counts, exact } = await countTexts([text]);
      return { tokens: counts[0] as number, exact };
    }
    const id = `c${++requestSeq}`;
    const progress = onProgress ? Comlink.proxy(onProgress) : undefined;
    const onAbort = () => {
      // A cancel that cannot be delivered (the worker is gone) has nothing left to stop.
      backend.then((b) => b.engine.cancel(id)).catch(() => undefined);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      // Comlink.proxy marks the callback for transfer and leaves it callable, so in-thread mode can use it as is.
      const result = await request((engine) => engine.countLarge(encoding, id, text, progress), budgetFor(text.length));
      if (result instanceof BudgetExceeded) {
        totals.estimated += 1;
        return { tokens: estimateTextTokens(text), exact: false };
      }
      totals.counted += 1;
      return { tokens: result, exact: true };
    } catch (error) {
      if (signal?.aborted) throw new TabulaError('tokens/aborted', 'Counting was aborted.', { cause: signal.reason });
      throw error;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  };

  return {
    name: encoding,
    get mode() {
      return current?.mode ?? (preference === 'none' ? 'in-thread' : preference);
    },
    ready,
    get fallbackReason() {
      return fallbackReason;
    },
    async count(messages) {
      return (await countEach(messages)).reduce((sum, n) => sum + n, 0);
    },
    countEach,
    async countText(text, opts) {
      return (await measureText(text, opts)).tokens;
    },
    measureText,
    stats: () => ({ ...totals }),
    close() {
      if (closed) return;
      closed = true;
      void backend.then((b) => b.dispose());
    },
  };
}
