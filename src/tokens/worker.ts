/// <reference lib="webworker" />
/** The dedicated Web Worker: one counting engine behind Comlink. */
import * as Comlink from 'comlink';
import { createEngine } from './engine.js';

Comlink.expose(createEngine());
