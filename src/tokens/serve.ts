/// <reference lib="webworker" />
/**
 * Serving an engine from inside a worker, through Comlink. Each worker
 * entry (one per encoding) calls {@link serve} with the encoding it
 * imports; the same file runs as a dedicated Worker or as a SharedWorker.
 */
import * as Comlink from 'comlink';
import { createEngineHost, type EncodingLoaders } from './engine.js';

/**
 * Serves the engine in this worker. In a SharedWorker the encoding is
 * loaded once for every tab of the origin, and each tab's port gets its own
 * engine, so its request ids (and cancels) cannot reach another tab's
 * counts; a dedicated Worker serves its one page.
 */
export function serve(loaders: EncodingLoaders): void {
  const host = createEngineHost(loaders);
  const scope = self as unknown as SharedWorkerGlobalScope & DedicatedWorkerGlobalScope;
  if (typeof SharedWorkerGlobalScope === 'function' && scope instanceof SharedWorkerGlobalScope) {
    scope.onconnect = (event: MessageEvent) => {
      const [port] = event.ports;
      if (port) Comlink.expose(host.connect(), port);
    };
  } else {
    Comlink.expose(host.connect(), scope);
  }
}
