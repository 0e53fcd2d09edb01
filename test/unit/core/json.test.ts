import fc from 'fast-check';
import { fcParams } from '../seed.js';
import { describe, expect, it } from 'vitest';
import {
  JsonValueSchema,
  assertJsonValue,
  cloneJson,
  deepFreeze,
  findJsonProblem,
  isTabulaError,
  stableKey,
  structuralEqual,
  type JsonValue,
} from '../../../src/core/index.js';

describe('JSON validation', () => {
  it('accepts JSON all the way down', () => {
    expect(findJsonProblem({ a: [1, 'x', null, true, { b: [] }] })).toBeNull();
    expect(findJsonProblem(Object.create(null) as object)).toBeNull();
  });

  it.each([
    ['undefined', { a: undefined }, ['a']],
    ['NaN', [1, NaN], [1]],
    ['Infinity', { x: { y: Infinity } }, ['x', 'y']],
    ['a Date', { at: new Date(0) }, ['at']],
    ['a Map', [new Map()], [0]],
    ['a function', { f: () => 1 }, ['f']],
    ['a bigint', { n: 1n }, ['n']],
  ])('names the path of %s', (_label, value, path) => {
    expect(findJsonProblem(value)?.path).toEqual(path);
  });

  it('finds holes and cycles', () => {
    expect(findJsonProblem([1, , 3])?.path).toEqual([1]); // eslint-disable-line no-sparse-arrays
    const cyclic: Record<string, unknown> = { a: {} };
    (cyclic.a as Record<string, unknown>).back = cyclic;
    expect(findJsonProblem(cyclic)?.message).toMatch(/circular/);
    // The same object twice, but not inside itself, is fine.
    const shared = { x: 1 };
    expect(findJsonProblem([shared, shared])).toBeNull();
  });

  it('throws schema/invalid naming the thing and the field', () => {
    let caught: unknown;
    try {
      assertJsonValue({ plan: { due: new Date() } }, 'scratchpad key "plan"');
    } catch (error) {
      caught = error;
    }
    expect(isTabulaError(caught, 'schema/invalid')).toBe(true);
    expect((caught as Error).message).toMatch(/scratchpad key "plan".*plan\.due.*Date/);
  });

  it('is a zod schema with exact paths', () => {
    const result = JsonValueSchema.safeParse({ list: [1, NaN] });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['list', 1]);
    expect(JsonValueSchema.safeParse({ ok: [1] }).success).toBe(true);
  });
});

describe('cloneJson and deepFreeze', () => {
  it('clones share nothing with the original', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const copy = cloneJson(value as JsonValue);
        expect(copy).toEqual(value);
        expect(stableKey(copy)).toBe(stableKey(value));
      }),
      fcParams(200),
    );
    const original = { a: { b: [1] } };
    const copy = cloneJson(original);
    const hostile = JSON.parse('{"__proto__": {"polluted": true}}') as JsonValue;
    const hostileCopy = cloneJson(hostile) as Record<string, unknown>;
    expect(Object.getPrototypeOf(hostileCopy)).toBe(Object.prototype);
    expect(Object.keys(hostileCopy)).toEqual(['__proto__']);
    copy.a.b.push(2);
    expect(original.a.b).toEqual([1]);
  });

  it('freezes every level', () => {
    const value = deepFreeze({ a: { b: [{ c: 1 }] } });
    expect(Object.isFrozen(value.a.b[0])).toBe(true);
    expect(() => {
      (value.a.b as unknown as number[]).push(2);
    }).toThrow(TypeError);
  });
});

describe('stableKey', () => {
  it('ignores key order and nothing else', () => {
    expect(stableKey({ a: 1, b: [1, 2] })).toBe(stableKey({ b: [1, 2], a: 1 }));
    expect(stableKey([1, 2])).not.toBe(stableKey([2, 1]));
    expect(stableKey({ a: '1' })).not.toBe(stableKey({ a: 1 }));
    expect(stableKey(null)).not.toBe(stableKey(NaN));
    expect(stableKey({ a: undefined })).not.toBe(stableKey({}));
  });

  it('compares non-JSON journal entries structurally', () => {
    expect(structuralEqual(new Date(5), new Date(5))).toBe(true);
    expect(structuralEqual(new Date(5), new Date(6))).toBe(false);
    expect(structuralEqual(new Map([['a', 1]]), new Map([['a', 1]]))).toBe(true);
    expect(structuralEqual(new Set([1, 2]), new Set([2, 1]))).toBe(true);
    class Edit {
      constructor(readonly by: string) {}
    }
    expect(structuralEqual(new Edit('a'), new Edit('a'))).toBe(true);
    expect(structuralEqual(new Edit('a'), { by: 'a' })).toBe(false);
  });

  it('agrees with deep equality on random JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        const equal = JSON.stringify(sortDeep(a)) === JSON.stringify(sortDeep(b));
        expect(stableKey(a) === stableKey(b)).toBe(equal);
      }),
      fcParams(300),
    );
  });
});

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortDeep);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortDeep((value as Record<string, unknown>)[key])]),
    );
  }
  // -0 and 0 are the same JSON number.
  return Object.is(value, -0) ? 0 : value;
}
