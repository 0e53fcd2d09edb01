/**
 * The exact counter under the engine: the heap merge gives the same number
 * of tokens as the textbook byte-pair merge (lowest rank first, leftmost on
 * ties), windows stop at the first pre-token boundary at or after their
 * minimum, long pre-tokens (ASCII or not) count as gpt-tokenizer counts
 * them, and a gpt-tokenizer without the parts this reads is refused (the
 * engine then falls back to gpt-tokenizer's own count).
 */
import fc from 'fast-check';
import o200k from 'gpt-tokenizer/encoding/o200k_base';
import cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import { describe, expect, it } from 'vitest';
import { LONG_PRETOKEN_CHARS, exactCounterOf, mergeCount } from '../../../src/tokens/bpe.js';
import { fcParams } from '../seed.js';

const plain = { disallowedSpecial: new Set<string>() };

/** The merge loop as tiktoken spells it: rescan every pair, merge the lowest rank (leftmost on ties), until no pair is a token. */
function naiveMergeCount(text: string, ranks: ReadonlyMap<string, number>): number {
  const parts = [...text];
  for (;;) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const rank = ranks.get(parts[i]! + parts[i + 1]!);
      if (rank !== undefined && rank < bestRank) {
        bestRank = rank;
        best = i;
      }
    }
    if (best === -1) return parts.length;
    parts.splice(best, 2, parts[best]! + parts[best + 1]!);
  }
}

describe('mergeCount', () => {
  it('counts the tokens the textbook merge makes, for any rank table (property)', () => {
    // A small alphabet so that pairs repeat (ties broken by position) and merged parts merge again.
    const letter = fc.constantFrom('a', 'b', 'c');
    const text = fc.string({ unit: letter, maxLength: 40 });
    // Ranks for random substrings of 2–6 letters; equal ranks for different substrings are allowed too.
    const table = fc.array(fc.tuple(fc.string({ unit: letter, minLength: 2, maxLength: 6 }), fc.nat({ max: 30 })), { maxLength: 40 });
    fc.assert(
      fc.property(text, table, (t, entries) => {
        const ranks = new Map(entries);
        expect(mergeCount(t.length, (start, end) => ranks.get(t.slice(start, end)))).toBe(naiveMergeCount(t, ranks));
      }),
      fcParams(500),
    );
  });

  it('counts the tokens the textbook merge makes with a vocabulary built by merges, as a real one is (property)', () => {
    // Each token after the letters is the concatenation of two earlier ones, so merges chain and the order
    // in which competing pairs merge decides the count: the heap must pop exactly lowest rank, leftmost first.
    const vocabulary = fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 40 }).map((merges) => {
      const tokens = ['a', 'b', 'c'];
      for (const [x, y] of merges) tokens.push(tokens[x % tokens.length]! + tokens[y % tokens.length]!);
      const ranks = new Map<string, number>();
      for (const token of tokens.slice(3)) if (!ranks.has(token)) ranks.set(token, ranks.size);
      return ranks;
    });
    const text = fc.string({ unit: fc.constantFrom('a', 'b', 'c'), maxLength: 120 });
    fc.assert(
      fc.property(vocabulary, text, (ranks, t) => {
        expect(mergeCount(t.length, (start, end) => ranks.get(t.slice(start, end)))).toBe(naiveMergeCount(t, ranks));
      }),
      fcParams(500),
    );
  });

  it('merges leftmost first on equal ranks, and merged parts again', () => {
    // "aaa": both pairs are "aa"; the leftmost merges first, leaving "aa" + "a" (2), never "a" + "aa" then "aaa".
    const ranks = new Map([
      ['aa', 0],
      ['aaa', 1],
      ['aaaa', 2],
    ]);
    const count = (t: string) => mergeCount(t.length, (s, e) => ranks.get(t.slice(s, e)));
    expect(count('')).toBe(0);
    expect(count('a')).toBe(1);
    expect(count('aa')).toBe(1);
    expect(count('aaaa')).toBe(1); // aa aa, then aaaa
    expect(count('aaaaa')).toBe(2); // aa aa a → aaaa a
    // Only "ab" and "abab" are tokens: "ababab" → ab ab ab → abab ab.
    const pairs = new Map([
      ['ab', 0],
      ['abab', 1],
    ]);
    expect(mergeCount(6, (s, e) => pairs.get('ababab'.slice(s, e)))).toBe(2);
    // No token at all: every byte stays a part.
    expect(mergeCount(5, () => undefined)).toBe(5);
  });

  it('holds its heap past its first size (more candidate pairs than bytes)', () => {
    // Every pair of a long run is a candidate and each merge pushes new ones: the heap must grow.
    const t = 'ab'.repeat(600);
    const ranks = new Map<string, number>();
    for (let n = 2; n <= t.length; n *= 2) {
      ranks.set(t.slice(0, n), n);
      ranks.set(t.slice(1, n + 1), n + 1);
    }
    expect(mergeCount(t.length, (s, e) => ranks.get(t.slice(s, e)))).toBe(naiveMergeCount(t, ranks));
  });
});

describe('exactCounterOf', () => {
  for (const [encoding, api] of Object.entries({ o200k_base: o200k, cl100k_base: cl100k })) {
    it(`counts long pre-tokens, ASCII and not, as gpt-tokenizer does (${encoding})`, () => {
      const counter = exactCounterOf(api);
      expect(counter).not.toBeNull();
      const texts = [
        // One pre-token each, on both sides of the length where the heap merge takes over.
        'abcdefghij'.repeat(LONG_PRETOKEN_CHARS / 10 + 1),
        'x'.repeat(LONG_PRETOKEN_CHARS - 1),
        'x'.repeat(LONG_PRETOKEN_CHARS),
        'éèà'.repeat(120),
        'Straße'.repeat(60),
        '字'.repeat(LONG_PRETOKEN_CHARS + 7),
        // A letter of several bytes that is not one token: merged by bytes, not by characters.
        '龘'.repeat(300),
        `${'a'.repeat(300)}龘`,
        `${'=-'.repeat(200)}\n${'naïve'.repeat(80)} end`,
        // A pre-token that is itself one token.
        'hello',
      ];
      for (const text of texts) expect(counter!.count(text), text.slice(0, 20)).toBe(api.countTokens(text, plain));
    });
  }

  it('stops a window at the first pre-token boundary at or after its minimum', () => {
    const counter = exactCounterOf(o200k)!;
    const text = 'hello world foo\n\n  bar'; // pre-tokens: "hello" " world" " foo" "\n\n" " " " bar"
    expect(counter.countWindow(text, 0, 5)).toEqual({ tokens: 1, end: 5 });
    expect(counter.countWindow(text, 0, 6)).toEqual({ tokens: 2, end: 11 });
    expect(counter.countWindow(text, 5, 6)).toEqual({ tokens: 1, end: 11 });
    expect(counter.countWindow(text, 11, 1)).toEqual({ tokens: 1, end: 15 });
    // Past the last boundary: the rest of the text.
    expect(counter.countWindow(text, 11, 1000)).toEqual({ tokens: 4, end: text.length });
    expect(counter.countWindow(text, text.length, 10)).toEqual({ tokens: 0, end: text.length });
    // Windows laid end to end count the whole text, wherever they stop.
    for (const minChars of [1, 3, 7]) {
      let start = 0;
      let tokens = 0;
      while (start < text.length) {
        const window = counter.countWindow(text, start, minChars);
        expect(window.end).toBeGreaterThan(start);
        tokens += window.tokens;
        start = window.end;
      }
      expect(tokens).toBe(o200k.countTokens(text, plain));
    }
  });

  it('keeps its own regex state: gpt-tokenizer counts the same between windows', () => {
    const counter = exactCounterOf(o200k)!;
    const text = 'one two three four five six';
    const first = counter.countWindow(text, 0, 4);
    expect(first).toEqual({ tokens: 2, end: 7 });
    expect(o200k.countTokens(text, plain)).toBe(6);
    expect(counter.countWindow(text, first.end, 4)).toEqual({ tokens: 1, end: 13 });
  });

  it('refuses a gpt-tokenizer whose encoder lacks a part it reads', () => {
    // The regex gpt-tokenizer splits with (its typings mark the encoder private).
    const splitRegex = (o200k as unknown as { bytePairEncodingCoreProcessor: { tokenSplitRegex: RegExp } }).bytePairEncodingCoreProcessor.tokenSplitRegex;
    const complete = {
      tokenSplitRegex: splitRegex,
      getBpeRankFromString: () => undefined,
      getBpeRankFromBytes: () => undefined,
      bytePairEncode: () => [],
    };
    expect(exactCounterOf({ bytePairEncodingCoreProcessor: complete })).not.toBeNull();
    const broken: Record<string, unknown>[] = [
      { ...complete, tokenSplitRegex: splitRegex.source },
      { ...complete, tokenSplitRegex: new RegExp(splitRegex.source, 'u') }, // not global: exec would not advance
      { ...complete, getBpeRankFromString: undefined },
      { ...complete, getBpeRankFromBytes: 1 },
      { ...complete, bytePairEncode: null },
    ];
    for (const [index, encoder] of broken.entries()) expect(exactCounterOf({ bytePairEncodingCoreProcessor: encoder }), `variant ${index}`).toBeNull();
    for (const api of [null, undefined, 'o200k', {}, { bytePairEncodingCoreProcessor: null }, { bytePairEncodingCoreProcessor: 'core' }]) {
      expect(exactCounterOf(api), JSON.stringify(api)).toBeNull();
    }
  });
});
