/// <reference lib="webworker" />
/**
 * The SharedWorker: one counting engine (one loaded encoding) for every tab
 * of the origin; each tab connects through its own port.
 */
import * as Comlink from 'comlink';
import { createEngine } from './engine.js';

const engine = createEngine();
const scope = self as unknown as SharedWorkerGlobalScope;
scope.onconnect = (event: MessageEvent) => {
  const [port] = event.ports;
  if (port) Comlink.expose(engine, port);
};
