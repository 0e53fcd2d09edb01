/**
 * The encodings of the calling thread's engine (the fallback when no worker
 * starts), each loaded on first use with a dynamic import, so a page that
 * never falls back never loads one. Kept out of engine.ts, which the worker
 * entries import: there these imports would put every encoding in every
 * worker file.
 */
import type { EncodingLoaders } from './engine.js';

/** Every encoding, loaded on first use. */
export const IN_THREAD_ENCODINGS: EncodingLoaders = {
  o200k_base: () => import('gpt-tokenizer/encoding/o200k_base'),
  cl100k_base: () => import('gpt-tokenizer/encoding/cl100k_base'),
};
