import { describe, expect, it } from 'vitest';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { createEngine } from '../../../src/tokens/engine.js';
import { MAX_CHUNK_CHARS, splitForCounting } from '../../../src/tokens/split.js';
import { SAMPLES } from './samples.js';

const plain = { disallowedSpecial: new Set<string>() };
const reference = { o200k_base: o200k.countTokens, cl100k_base: cl100k.countTokens } as const;

describe('counting engine', () => {
  for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
    it(`equals gpt-tokenizer's own counts for ${encoding} on the sample set`, async () => {
      const engine = createEngine();
      const texts = Object.values(SAMPLES);
      const counts = await engine.countTexts(encoding, texts);
      expect(counts).toEqual(texts.map((text) => reference[encoding](text, plain)));
      expect(counts[Object.keys(SAMPLES).indexOf('empty')]).toBe(0);
    });
  }

  it('counts special-token strings in user text instead of throwing', async () => {
    const engine = createEngine();
    const [n] = await engine.countTexts('o200k_base', [SAMPLES.special!]);
    expect(n).toBeGreaterThan(10);
    expect(() => o200k.countTokens(SAMPLES.special!)).toThrow(/Disallowed special token/);
  });

  it('splits large text at safe newlines and keeps the count exact', async () => {
    const paragraph = `${SAMPLES.english}\n${SAMPLES.code}\n${SAMPLES.chinese}\n`;
    const text = paragraph.repeat(3000); // ~570 KB
    const chunks = splitForCounting(text);
    expect(chunks.length).toBeGreaterThan(5);
    expect(chunks.join('')).toBe(text);
    const engine = createEngine();
    const progress: number[] = [];
    const total = await engine.countLarge('o200k_base', 'r1', text, (done) => progress.push(done));
    expect(total).toBe(o200k.countTokens(text, plain));
    expect(progress.at(-1)).toBe(text.length);
    expect(progress.length).toBe(chunks.length);
  });

  it('bounds chunks even in text without a safe newline', () => {
    const text = 'a'.repeat(MAX_CHUNK_CHARS * 2 + 10);
    const chunks = splitForCounting(text);
    expect(chunks.every((chunk) => chunk.length <= MAX_CHUNK_CHARS)).toBe(true);
    expect(chunks.join('')).toBe(text);
  });

  it('cancel() stops a large count between chunks', async () => {
    const engine = createEngine();
    const text = `${SAMPLES.english}\n`.repeat(20_000);
    let calls = 0;
    const running = engine.countLarge('o200k_base', 'r2', text, () => {
      calls += 1;
      if (calls === 2) engine.cancel('r2');
    });
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    expect(calls).toBeLessThan(splitForCounting(text).length);
  });
});
