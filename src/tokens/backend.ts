/**
 * Where the token counter's engine runs: a SharedWorker when the browser
 * has one (one loaded encoding for every tab), else a dedicated Worker,
 * else the calling thread. This module starts a backend, with the
 * encoding loaded, and gives back how to release it; Comlink carries the
 * calls to a worker.
 *
 * - If a worker cannot start (CSP, a bundler that did not emit the worker
 *   file, an old browser) it falls back to the calling thread and reports
 *   why; it never throws for that.
 * - It knows nothing of caching, estimates or request budgets past the
 *   start: the counter (counter.ts) decides those.
 */
import * as Comlink from 'comlink';
import { createEngine, type CountingEngine, type Encoding } from './engine.js';
import { IN_THREAD_ENCODINGS } from './in-thread-encodings.js';

/** Where the tokenizer actually runs. */
export type CounterMode = 'shared' | 'dedicated' | 'in-thread';

/** Which worker to try first; 'none' counts in the calling thread (`TokenCounterOptions.worker`). */
export type WorkerPreference = 'shared' | 'dedicated' | 'none';

/** A started engine: where it runs, the engine (or its Comlink proxy), and how to release it. */
export interface Backend {
  readonly mode: CounterMode;
  readonly engine: CountingEngine | Comlink.Remote<CountingEngine>;
  dispose(): void;
}

/** `promise`, or a rejection once `ms` milliseconds have passed without it settling. */
export function withBudget<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

type Kind = 'shared' | 'dedicated';

/**
 * Starts the worker for `encoding`. Each `new (Shared)Worker(new URL('…', import.meta.url))`
 * is written out literally, one per encoding and kind, because that literal is what Vite and
 * webpack look for to emit the worker file; each has its own name (webpack merges same-named chunks).
 */
function spawn(kind: Kind, encoding: Encoding, url: string | URL | undefined): Worker | SharedWorker {
  const options = { type: 'module' as const, name: `tabula-tokens-${encoding}-${kind}` };
  if (url !== undefined) return kind === 'shared' ? new SharedWorker(url, options) : new Worker(url, options);
  if (encoding === 'o200k_base') {
    return kind === 'shared'
      ? new SharedWorker(new URL('./o200k-worker.js', import.meta.url), { type: 'module', name: 'tabula-tokens-o200k_base-shared' })
      : new Worker(new URL('./o200k-worker.js', import.meta.url), { type: 'module', name: 'tabula-tokens-o200k_base-dedicated' });
  }
  return kind === 'shared'
    ? new SharedWorker(new URL('./cl100k-worker.js', import.meta.url), { type: 'module', name: 'tabula-tokens-cl100k_base-shared' })
    : new Worker(new URL('./cl100k-worker.js', import.meta.url), { type: 'module', name: 'tabula-tokens-cl100k_base-dedicated' });
}

function startWorker(kind: Kind, encoding: Encoding, url: string | URL | undefined): { backend: Backend; failed: Promise<never> } {
  const worker = spawn(kind, encoding, url);
  const failed = new Promise<never>((_, reject) => {
    worker.addEventListener('error', (event) => reject(new Error((event as ErrorEvent).message || `the ${kind} worker script failed to load`)), { once: true });
  });
  // Told apart by shape, not `instanceof Worker`: a page may have SharedWorker without Worker.
  const engine = Comlink.wrap<CountingEngine>('port' in worker ? worker.port : worker);
  return {
    failed,
    backend: {
      mode: kind,
      engine,
      dispose: () => {
        engine[Comlink.releaseProxy]();
        if ('port' in worker) worker.port.close();
        else worker.terminate();
      },
    },
  };
}

function inThread(): Backend {
  return { mode: 'in-thread', engine: createEngine(IN_THREAD_ENCODINGS), dispose: () => undefined };
}

/** What {@link startBackend} needs: the counter's checked options. */
export interface BackendOptions {
  readonly encoding: Encoding;
  readonly preference: WorkerPreference;
  /** The worker script to start instead of the bundled one (`TokenCounterOptions.workerUrl`). */
  readonly workerUrl: string | URL | undefined;
  /** How long a worker may take to start and load its encoding before the next one is tried. */
  readonly startTimeoutMs: number;
  /** Called with why the workers were given up, before the calling thread loads the encoding. */
  readonly onFallback: (reason: string) => void;
}

/**
 * Starts a backend with the encoding loaded: the workers `preference` names, in order, then the
 * calling thread. Rejects only if loading the encoding into the calling thread fails.
 */
export async function startBackend({ encoding, preference, workerUrl, startTimeoutMs, onFallback }: BackendOptions): Promise<Backend> {
  const attempts: Kind[] = [];
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
    let started: ReturnType<typeof startWorker> | undefined;
    try {
      started = startWorker(kind, encoding, workerUrl);
      await withBudget(Promise.race([started.backend.engine.load(encoding), started.failed]), startTimeoutMs);
      return started.backend;
    } catch (error) {
      started?.backend.dispose();
      reasons.push(`${kind} worker: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (attempts.length > 0) onFallback(reasons.join('; '));
  const local = inThread();
  await local.engine.load(encoding);
  return local;
}
