/**
 * The two worker entry points, imported as a worker would run them (with a
 * stand-in dedicated worker scope): each serves exactly the encoding it is
 * named for, so a bundler that emits one file per entry ships one encoding
 * per worker.
 */
import * as Comlink from 'comlink';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CountingEngine } from '../../../src/tokens/engine.js';
import { SAMPLES } from './samples.js';

const plain = { disallowedSpecial: new Set<string>() };
const open: MessagePort[] = [];
afterEach(() => {
  vi.unstubAllGlobals();
  open.splice(0).forEach((port) => port.close());
});

const entries = [
  { file: 'o200k-worker', encoding: 'o200k_base', other: 'cl100k_base', countTokens: o200k.countTokens, load: () => import('../../../src/tokens/o200k-worker.js') },
  { file: 'cl100k-worker', encoding: 'cl100k_base', other: 'o200k_base', countTokens: cl100k.countTokens, load: () => import('../../../src/tokens/cl100k-worker.js') },
] as const;

describe('worker entry points', () => {
  for (const entry of entries) {
    it(`${entry.file} serves ${entry.encoding} and only it`, async () => {
      const { port1, port2 } = new MessageChannel();
      open.push(port1, port2);
      vi.stubGlobal('self', port2);
      // A fresh evaluation, as each worker start is: the entry serves at import.
      vi.resetModules();
      await entry.load();
      const engine = Comlink.wrap<CountingEngine>(port1);
      expect(await engine.countTexts(entry.encoding, [SAMPLES.code!])).toEqual([entry.countTokens(SAMPLES.code!, plain)]);
      await expect(engine.load(entry.other)).rejects.toThrow(`This token worker does not hold the encoding ${entry.other}.`);
    });
  }
});
