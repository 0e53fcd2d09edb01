/**
 * Large texts are counted in pieces; the total must still equal
 * gpt-tokenizer's count of the whole text, exactly, wherever the pieces
 * are cut. Code is the hard case: `}` then a newline then `//` or `/**`,
 * indented lines and blank lines are places a tokenizer merges across.
 */
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import { describe, expect, it } from 'vitest';
import { createTokenCounter } from '../../../src/tokens/index.js';

const plain = { disallowedSpecial: new Set<string>() };
const reference = { o200k_base: o200k.countTokens, cl100k_base: cl100k.countTokens } as const;

const CODE_LINES = [
  'export function add(a: number, b: number): number {',
  '  return a + b;',
  '}',
  '// a line comment right after a closing brace',
  'const xs = [1, 2, 3].map((x) => x * 2);',
  'if (xs.length > 2) {',
  '    console.log(xs);',
  '}',
  '/** A doc comment after a brace. */',
  'class Point { constructor(readonly x = 0, readonly y = 0) {} }',
  '',
  '',
  '\tconst tabbed = { a: 1 };',
  '}',
  '/',
  '  ',
  '#!/usr/bin/env node',
  'https://example.com/a/b?c=d',
  '}//',
];

/** About `chars` characters of code whose lines start at line `rotate` of the sample, so cuts fall on every kind of line. */
function codeText(rotate: number, chars: number): string {
  const lines = [...CODE_LINES.slice(rotate), ...CODE_LINES.slice(0, rotate)];
  const block = `${lines.join('\n')}\n`;
  return block.repeat(Math.ceil(chars / block.length));
}

describe('exact counts of large code texts', () => {
  for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
    it(`equal gpt-tokenizer's count of the whole text (${encoding}), wherever the chunks are cut`, async () => {
      const counter = createTokenCounter({ worker: 'none', encoding });
      try {
        for (let rotate = 0; rotate < CODE_LINES.length; rotate++) {
          // Just over the 64 KB chunk target, and well over it.
          for (const chars of [66_000, 140_000]) {
            const text = codeText(rotate, chars);
            expect(await counter.countText(text), `rotate ${rotate}, ${text.length} chars`).toBe(reference[encoding](text, plain));
          }
        }
      } finally {
        counter.close();
      }
    }, 120_000);
  }
});
