/**
 * Stand-in `Worker` and `SharedWorker` globals for Node, so the counter's
 * worker paths (start-up, the fallback order, start and request budgets,
 * restarts, disposal) run for real in unit tests. Each stand-in connects the
 * counter to a script over a real MessageChannel, the way a browser does, and
 * the script is the real `serve()` (src/tokens/serve.ts) or an engine a test
 * writes to misbehave (never answer, fail, answer nonsense). Nothing here
 * reaches into the counter: tests observe what it spawned, terminated and
 * closed, and what it answered.
 */
import * as Comlink from 'comlink';
import { vi } from 'vitest';
import type { CountingEngine, EncodingLoaders } from '../../../src/tokens/engine.js';
import { IN_THREAD_ENCODINGS } from '../../../src/tokens/in-thread-encodings.js';
import { serve } from '../../../src/tokens/serve.js';

export type Kind = 'shared' | 'dedicated';

/** One `new Worker()` / `new SharedWorker()` the code under test made. */
export interface Spawned {
  readonly kind: Kind;
  readonly url: string;
  readonly options: WorkerOptions | undefined;
  /** A dedicated worker's terminate() was called. */
  terminated: boolean;
  /** A shared worker's port was closed. */
  portClosed: boolean;
}

/** What the script at a URL does once started. */
export type Script =
  /** The real serve() with these encodings (the bundled entries: the encoding the file is named for). */
  | { serve: EncodingLoaders }
  /** Fails to load: an `error` event on the worker object, with this message ('' = none, as browsers often send). */
  | { fail: string }
  /** Starts and never answers (a script stuck at import, a CSP that blocks it silently). */
  | { silent: true }
  /** The constructor itself throws, with this message (a URL the page may not load, a worker-src CSP in some browsers). */
  | { throws: string }
  /** Serves this engine over each connection instead of the real one. */
  | { engine: () => CountingEngine };

/** The script a bundled entry URL stands for: the encoding its file name names, served for real. */
export function bundledScript(url: string): Script {
  if (url.endsWith('/o200k-worker.js')) return { serve: { o200k_base: IN_THREAD_ENCODINGS.o200k_base } };
  if (url.endsWith('/cl100k-worker.js')) return { serve: { cl100k_base: IN_THREAD_ENCODINGS.cl100k_base } };
  return { fail: `no script at ${url}` };
}

/** The fake SharedWorkerGlobalScope serve() recognises; onconnect is what serve() sets. */
class FakeSharedScope {
  onconnect: ((event: MessageEvent) => void) | null = null;
}

function errorEvent(message: string): Event {
  // Node has no ErrorEvent; the counter reads only `message`.
  return Object.assign(new Event('error'), { message });
}

/** Runs serve() with `scope` as the worker's global scope, as a worker entry does at import. */
export function serveIn(scope: unknown, loaders: EncodingLoaders, shared: boolean): void {
  const had = Object.prototype.hasOwnProperty.call(globalThis, 'self');
  const before: unknown = Reflect.get(globalThis, 'self');
  const scopeClass: unknown = Reflect.get(globalThis, 'SharedWorkerGlobalScope');
  Reflect.set(globalThis, 'self', scope);
  if (shared) Reflect.set(globalThis, 'SharedWorkerGlobalScope', FakeSharedScope);
  try {
    serve(loaders);
  } finally {
    if (had) Reflect.set(globalThis, 'self', before);
    else Reflect.deleteProperty(globalThis, 'self');
    if (scopeClass === undefined) Reflect.deleteProperty(globalThis, 'SharedWorkerGlobalScope');
    else Reflect.set(globalThis, 'SharedWorkerGlobalScope', scopeClass);
  }
}

/** A shared scope that serve() has set up, to connect ports to. */
export function sharedScope(loaders: EncodingLoaders): { connect(port: MessagePort | undefined): void } {
  const scope = new FakeSharedScope();
  serveIn(scope, loaders, true);
  return {
    connect(port) {
      if (!scope.onconnect) throw new Error('serve() set no onconnect handler on the shared scope');
      scope.onconnect(new MessageEvent('connect', { ports: port ? [port] : [] }));
    },
  };
}

export interface FakeWorkers {
  /** Every worker the code under test made, in order. */
  readonly spawned: Spawned[];
  /** Closes every channel still open (call in afterEach). */
  uninstall(): void;
}

/**
 * Installs `Worker` and `SharedWorker` globals whose scripts `scriptFor` picks
 * by kind and URL. A shared script runs once per URL and name and serves every
 * later connection too, as a browser's SharedWorker does.
 */
export function installFakeWorkers(scriptFor: (kind: Kind, url: string) => Script = (_kind, url) => bundledScript(url)): FakeWorkers {
  const spawned: Spawned[] = [];
  const ports: MessagePort[] = [];
  const sharedScopes = new Map<string, { connect(port: MessagePort): void }>();

  const channel = (): MessageChannel => {
    const made = new MessageChannel();
    ports.push(made.port1, made.port2);
    return made;
  };

  /** The script for a new worker; a constructor that throws makes no worker (and nothing is recorded). */
  const scriptOf = (kind: Kind, url: string): Script => {
    const script = scriptFor(kind, url);
    if ('throws' in script) throw new DOMException(script.throws, 'SecurityError');
    return script;
  };

  /** Starts `script` behind `inner` (the worker's side); `raise` fires the error event on the worker object. */
  const run = (script: Script, kind: Kind, url: string, name: string, inner: MessagePort, raise: (event: Event) => void): void => {
    if ('fail' in script) {
      // The browser reports a failed script load after the constructor returned.
      queueMicrotask(() => raise(errorEvent(script.fail)));
    } else if ('engine' in script) {
      Comlink.expose(script.engine(), inner);
    } else if ('serve' in script) {
      if (kind === 'dedicated') {
        serveIn(inner, script.serve, false);
      } else {
        const key = `${url}#${name}`;
        let scope = sharedScopes.get(key);
        if (!scope) {
          scope = sharedScope(script.serve);
          sharedScopes.set(key, scope);
        }
        scope.connect(inner);
      }
    }
  };

  class FakeWorker extends EventTarget {
    readonly #record: Spawned;
    readonly #port: MessagePort;

    constructor(url: string | URL, options?: WorkerOptions) {
      super();
      const script = scriptOf('dedicated', String(url));
      this.#record = { kind: 'dedicated', url: String(url), options, terminated: false, portClosed: false };
      spawned.push(this.#record);
      const { port1, port2 } = channel();
      this.#port = port1;
      port1.onmessage = (event: MessageEvent) => this.dispatchEvent(new MessageEvent('message', { data: event.data as unknown }));
      run(script, 'dedicated', String(url), options?.name ?? '', port2, (event) => this.dispatchEvent(event));
    }

    postMessage(message: unknown, transfer: Transferable[] = []): void {
      if (!this.#record.terminated) this.#port.postMessage(message, transfer as never);
    }

    terminate(): void {
      this.#record.terminated = true;
      this.#port.close();
    }
  }

  class FakeSharedWorker extends EventTarget {
    readonly port: MessagePort;

    constructor(url: string | URL, options?: WorkerOptions) {
      super();
      const script = scriptOf('shared', String(url));
      const record: Spawned = { kind: 'shared', url: String(url), options, terminated: false, portClosed: false };
      spawned.push(record);
      const { port1, port2 } = channel();
      const close = port1.close.bind(port1);
      port1.close = () => {
        record.portClosed = true;
        close();
      };
      this.port = port1;
      run(script, 'shared', String(url), options?.name ?? '', port2, (event) => this.dispatchEvent(event));
    }
  }

  vi.stubGlobal('Worker', FakeWorker);
  vi.stubGlobal('SharedWorker', FakeSharedWorker);
  return {
    spawned,
    uninstall() {
      vi.unstubAllGlobals();
      for (const port of ports) port.close();
    },
  };
}

/** One call a held engine received, which the test answers or fails by hand. */
export interface Held {
  readonly method: 'countTexts' | 'countLarge';
  readonly texts: string[];
  /** countLarge's request id, or ''. */
  readonly id: string;
  /** countLarge's progress callback (a Comlink proxy through a worker), if the counter passed one. */
  readonly progress: ((doneChars: number, totalChars: number) => unknown) | undefined;
  answer(value: unknown): void;
  fail(error: Error): void;
}

/**
 * An engine whose counts a test answers by hand (or `auto` answers at once),
 * recording every call and cancel. A cancel of a held countLarge fails it
 * with an AbortError, as the real engine does between windows.
 */
export function heldEngine(auto?: (held: Held) => unknown): {
  engine: () => CountingEngine;
  calls: Held[];
  cancels: string[];
  /** The n-th call (0-based), once it has arrived. */
  call: (n: number) => Promise<Held>;
} {
  const calls: Held[] = [];
  const cancels: string[] = [];
  const waiting = new Map<number, (held: Held) => void>();
  const hold = <T>(method: Held['method'], texts: string[], id = '', progress?: Held['progress']): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const held: Held = { method, texts, id, progress, answer: (value) => resolve(value as T), fail: reject };
      calls.push(held);
      waiting.get(calls.length - 1)?.(held);
      if (auto) held.answer(auto(held));
    });
  const engine = (): CountingEngine => ({
    load: () => Promise.resolve(),
    countTexts: (_encoding, texts) => hold('countTexts', texts),
    countLarge: (_encoding, id, text, onProgress) => hold('countLarge', [text], id, onProgress),
    cancel: (id) => {
      cancels.push(id);
      const error = new Error(`Counting request ${id} was cancelled.`);
      error.name = 'AbortError';
      calls.find((held) => held.id === id)?.fail(error);
    },
  });
  return {
    engine,
    calls,
    cancels,
    call: (n) => {
      const made = calls[n];
      return made ? Promise.resolve(made) : new Promise<Held>((resolve) => waiting.set(n, resolve));
    },
  };
}
