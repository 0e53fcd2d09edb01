import fc from 'fast-check';
import { fcParams } from '../seed.js';
import { describe, expect, it } from 'vitest';
import { shortHash } from '../../../src/core/hash.js';
import { shortHash as langgraphHash } from '../../../src/langgraph/records.js';
import { shortHash as agentsHash } from '../../../src/openai-agents/codec.js';

describe('shortHash', () => {
  it('is 16 lowercase hex digits, stable across runs (keys stored by the integrations depend on it)', () => {
    expect(shortHash('')).toBe('811c9dc501000193');
    expect(shortHash('thread-1')).toBe('1d7bee7f598eda73');
    expect(shortHash('a long key '.repeat(100))).toMatch(/^[0-9a-f]{16}$/);
  });

  it('tells apart strings that differ in one code unit, in order, or in length', () => {
    const inputs = ['ab', 'ba', 'abc', 'abd', 'ab\u0000', '\ud83d\ude00', '\ud83d\ude01'];
    expect(new Set(inputs.map(shortHash)).size).toBe(inputs.length);
  });
});

describe('shortHash on any text', () => {
  it('is always 16 hex digits, zero-padded in each half', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (text) => {
        expect(shortHash(text)).toMatch(/^[0-9a-f]{16}$/);
      }),
      fcParams(500),
    );
  });
});

describe("the integrations' own copies of shortHash", () => {
  // Each integration keeps its copy (it imports only the public API) and stores keys made with it:
  // a copy that drifted from the hash its keys were written with would lose every stored thread.
  it('hash every text as the core does', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (text) => {
        expect(langgraphHash(text)).toBe(shortHash(text));
        expect(agentsHash(text)).toBe(shortHash(text));
      }),
      fcParams(500),
    );
    expect([langgraphHash('thread-1'), agentsHash('thread-1')]).toEqual(['1d7bee7f598eda73', '1d7bee7f598eda73']);
  });
});
