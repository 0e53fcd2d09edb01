/** Exact token counting off the main thread (gpt-tokenizer in a worker, through Comlink): the part of the public `tabula-sdk` entry it re-exports (see src/index.ts). */
export { createTokenCounter } from './counter.js';
export type { CountTextOptions, TokenCounterOptions, WorkerTokenCounter } from './counter.js';
export type { CounterMode } from './backend.js';
export type { Encoding } from './engine.js';
