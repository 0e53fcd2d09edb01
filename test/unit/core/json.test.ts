import fc from 'fast-check';
import { fcParams } from '../seed.js';
import { describe, expect, it } from 'vitest';
import {
  JsonValueSchema,
  deepFreeze,
  isTabulaError,
  stableKey,
  structuralEqual,
  type JsonValue,
} from '../../../src/core/index.js';
import { MAX_JSON_DEPTH, assertJsonValue, assertSafeKey, cloneJson, findJsonProblem, findKeyProblem, isJsonValue } from '../../../src/core/json.js';
import { plainEqual } from '../../../src/core/json.js';
import { refusal } from './refusal.js';

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

describe('JSON validation: what each refusal says', () => {
  it.each([
    ['undefined', { a: undefined }, 'undefined is not JSON'],
    ['NaN', [NaN], 'NaN is not a JSON number'],
    ['-Infinity', [-Infinity], '-Infinity is not a JSON number'],
    ['a function', [() => 1], 'function is not JSON'],
    ['a symbol', [Symbol('s')], 'symbol is not JSON'],
    ['a bigint', [1n], 'bigint is not JSON'],
    ['a Date', [new Date(0)], 'an instance of Date is not JSON; store a plain object, array or primitive (e.g. a date as an ISO string)'],
    ['an anonymous class instance', [new ((() => class {})())()], 'an object with a custom prototype is not JSON'],
    ['an object without a constructor', [Object.create(Object.create(Object.create(null) as object) as object) as object], 'an object with a custom prototype is not JSON'],
    ['a hole', [1, , 3], 'hole in a sparse array is not JSON'], // eslint-disable-line no-sparse-arrays
  ])('%s: names what it found and what to store instead', (_label, value, message) => {
    const problem = findJsonProblem(value);
    expect(problem?.code).toBe('custom');
    expect(problem?.message.startsWith(message)).toBe(true);
    expect(isJsonValue(value)).toBe(false);
  });

  it('a cycle is reported where it closes, whole', () => {
    const cyclic: Record<string, unknown> = { a: {} };
    (cyclic.a as Record<string, unknown>).back = cyclic;
    expect(findJsonProblem(cyclic)).toEqual({ path: ['a', 'back'], code: 'custom', message: 'circular reference: JSON cannot contain cycles' });
  });

  it('refuses the key "__proto__" at any depth, naming it and what to do', () => {
    const nested = JSON.parse('{"ok": {"__proto__": 1}}') as unknown;
    const problem = findJsonProblem(nested);
    expect(problem?.path).toEqual(['ok', '__proto__']);
    expect(problem?.code).toBe('custom');
    expect(problem?.message).toBe(findKeyProblem('__proto__'));
    expect(problem?.message).toMatch(/"__proto__" is refused.*rename the key/);
    expect(findKeyProblem('proto')).toBeNull();
    expect(findKeyProblem('')).toBeNull();
    // After a refused key the same object is valid again elsewhere: the walk left no state behind.
    const error = refusal(() => assertSafeKey('__proto__', 'memory key'));
    expect(error.code).toBe('schema/invalid');
    expect(error.message).toMatch(/^memory key: the key "__proto__" is refused.*rename the key\.$/);
    expect(error.issues).toEqual([{ path: ['__proto__'], code: 'custom', message: findKeyProblem('__proto__') }]);
    expect(assertSafeKey('plan', 'memory key')).toBe('plan');
  });

  it(`accepts exactly ${MAX_JSON_DEPTH} levels of nesting and refuses one more, naming the path`, () => {
    const nest = (levels: number): unknown => {
      let value: unknown = 0;
      for (let level = 0; level < levels; level++) value = [value];
      return value;
    };
    expect(findJsonProblem(nest(MAX_JSON_DEPTH))).toBeNull();
    const problem = findJsonProblem(nest(MAX_JSON_DEPTH + 1));
    expect(problem).toEqual({
      path: Array.from({ length: MAX_JSON_DEPTH }, () => 0),
      code: 'custom',
      message: `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`,
    });
  });

  it('isJsonValue and the zod schema agree with findJsonProblem', () => {
    expect(isJsonValue({ a: [1, 'x', null] })).toBe(true);
    expect(isJsonValue({ a: [1, NaN] })).toBe(false);
    const result = JsonValueSchema.safeParse({ list: [1, NaN] });
    expect(result.error?.issues[0]).toMatchObject({ code: 'custom', path: ['list', 1], message: 'NaN is not a JSON number' });
  });

  it('assertJsonValue keeps the issue whole on the error', () => {
    const error = refusal(() => assertJsonValue({ a: [NaN] }, 'state field "x"'));
    expect(error.message).toBe('state field "x" is not a JSON value: at a[0], NaN is not a JSON number.');
    expect(error.issues).toEqual([{ path: ['a', 0], code: 'custom', message: 'NaN is not a JSON number' }]);
  });
});

describe('cloneJson and deepFreeze: edges', () => {
  it('a "__proto__" key is copied as an ordinary own data property', () => {
    const hostile = JSON.parse('{"__proto__": {"polluted": true}, "b": 1}') as JsonValue;
    const copy = cloneJson(hostile) as Record<string, unknown>;
    expect(Object.getOwnPropertyDescriptor(copy, '__proto__')).toEqual({
      value: { polluted: true },
      enumerable: true,
      writable: true,
      configurable: true,
    });
    expect(Object.getOwnPropertyDescriptor(copy, 'b')).toEqual({ value: 1, enumerable: true, writable: true, configurable: true });
  });

  it('freezes data, not code: a function inside is left as it is', () => {
    const callback = (): number => 1;
    const value = deepFreeze({ onDone: callback, list: [callback] });
    expect(Object.isFrozen(value.list)).toBe(true);
    expect(Object.isFrozen(callback)).toBe(false);
    expect(deepFreeze(callback)).toBe(callback);
    expect(Object.isFrozen(callback)).toBe(false);
  });

  it('returns primitives as they are and skips subtrees that are already frozen', () => {
    expect(deepFreeze(5)).toBe(5);
    expect(deepFreeze(null)).toBeNull();
    expect(deepFreeze('x')).toBe('x');
    const inner = { n: 1 };
    const outer = Object.freeze({ inner });
    expect(deepFreeze(outer)).toBe(outer);
    expect(Object.isFrozen(inner)).toBe(false);
    const list = deepFreeze({ items: [inner] });
    expect(Object.isFrozen(list.items)).toBe(true);
    expect(Object.isFrozen(inner)).toBe(true);
  });
});

describe('stableKey: one key per structure', () => {
  class Edit {
    constructor(readonly by: string) {}
  }
  class Note {
    constructor(readonly by: string) {}
  }
  // Values that are pairwise structurally different; no two may share a key, alone or inside an array.
  const distinct: [string, unknown][] = [
    ['undefined', undefined],
    ['null', null],
    ['"undefined"', 'undefined'],
    ['"null"', 'null'],
    ['""', ''],
    ['"1"', '1'],
    ['1', 1],
    ['2', 2],
    ['0', 0],
    ['1n', 1n],
    ['2n', 2n],
    ['"1n"', '1n'],
    ['true', true],
    ['false', false],
    ['"true"', 'true'],
    ['NaN', NaN],
    ['"NaN"', 'NaN'],
    ['Infinity', Infinity],
    ['-Infinity', -Infinity],
    ['Symbol(a)', Symbol('a')],
    ['Symbol(b)', Symbol('b')],
    ['function a', function a() {}],
    ['function b', function b() {}],
    ['Date(0)', new Date(0)],
    ['Date(1)', new Date(1)],
    ['[]', []],
    ['[1, 2]', [1, 2]],
    ['{}', {}],
    ['{a: 1}', { a: 1 }],
    ['{a: 1, b: 2}', { a: 1, b: 2 }],
    ['Map{}', new Map()],
    ['Map{a: 1}', new Map([['a', 1]])],
    ['Map{a: 2}', new Map([['a', 2]])],
    ['Map{1: a}', new Map([[1, 'a']])],
    ['Set{}', new Set()],
    ['Set{1}', new Set([1])],
    ['Set{"1"}', new Set(['1'])],
    ['Set{1, 2}', new Set([1, 2])],
    ['Set{12}', new Set([12])],
    ['Edit(a)', new Edit('a')],
    ['Edit(b)', new Edit('b')],
    ['Note(a)', new Note('a')],
  ];

  it('gives structurally different values different keys, alone and nested', () => {
    const owners = new Map<string, string>();
    for (const [label, value] of distinct) {
      for (const [form, key] of [
        ['', stableKey(value)],
        ['[x]', stableKey([value])],
        ['{k: x}', stableKey({ k: value })],
      ] as const) {
        expect(owners.get(key), `${form} ${label}`).toBeUndefined();
        owners.set(key, `${form} ${label}`);
      }
    }
  });

  it('quotes the names of symbols, functions and classes, so a name cannot pose as structure', () => {
    expect(structuralEqual([Symbol('a'), Symbol('b')], [Symbol('a),#symbol(b')])).toBe(false);
    const named = (name: string): (() => void) => Object.defineProperty(() => undefined, 'name', { value: name });
    expect(structuralEqual([named('a'), named('b')], [named('a),#function(b')])).toBe(false);
    class Plain {}
    const posing = new (Object.defineProperty(class {}, 'name', { value: 'Plain{},#an instance of Plain' }))();
    expect(structuralEqual([new Plain(), new Plain()], [posing])).toBe(false);
  });

  it('keeps equal what is equal: Maps and Sets in any order, symbols by description', () => {
    const keys = ['e', 'b', 'd', 'a', 'c', 'g', 'f'];
    const forward = new Map(keys.map((key, index) => [key, index]));
    const backward = new Map([...forward].reverse());
    expect(stableKey(forward)).toBe(stableKey(backward));
    expect(stableKey(new Set(keys))).toBe(stableKey(new Set([...keys].reverse())));
    expect(structuralEqual(Symbol(), Symbol(''))).toBe(true);
    expect(structuralEqual(Symbol('a'), Symbol('a'))).toBe(true);
    expect(structuralEqual(new Edit('a'), new Edit('a'))).toBe(true);
  });

  it('a Map with structurally equal keys does not depend on insertion order', () => {
    const forward = new Map<unknown, number>([
      [{}, 1],
      [{}, 2],
      [[1], 3],
      [[1], 4],
    ]);
    const backward = new Map([...forward].reverse());
    expect(stableKey(forward)).toBe(stableKey(backward));
    expect(structuralEqual(forward, new Map<unknown, number>([[{}, 1], [{}, 2], [[1], 3], [[1], 5]]))).toBe(false);
  });

  it('insertion order never matters for Maps and Sets, whatever their keys and values', () => {
    // Object keys are fresh objects, often structurally equal; primitive keys are unique (a repeated one would keep the last value).
    const freshObject = fc.oneof(fc.constant(0).map(() => ({})), fc.constant(0).map(() => [1]), fc.integer({ min: 0, max: 2 }).map((x) => ({ x })));
    const item = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom('a', 'b'), freshObject);
    const entries = fc.uniqueArray(fc.tuple(item, item), { maxLength: 8, selector: ([key]) => (typeof key === 'object' ? Symbol('object key') : key) });
    fc.assert(
      fc.property(entries, fc.func(fc.integer()), (list, rank) => {
        const shuffled = [...list].sort((a, b) => rank(a) - rank(b));
        expect(stableKey(new Map(shuffled))).toBe(stableKey(new Map(list)));
        expect(stableKey(new Set(shuffled.map(([key]) => key)))).toBe(stableKey(new Set(list.map(([key]) => key))));
      }),
      fcParams(300),
    );
  });

  it('for a JSON value, the key is the JSON text with object keys sorted', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.parse(stableKey(value))).toEqual(sortDeep(value));
      }),
      fcParams(200),
    );
    expect(stableKey({ b: [1, { d: null, c: 'x' }], a: true })).toBe('{"a":true,"b":[1,{"c":"x","d":null}]}');
  });

  it('refuses a cycle with argument/invalid naming where it closes, but a shared subtree is fine', () => {
    const cyclic: Record<string, unknown> = { a: { b: [] } };
    ((cyclic.a as Record<string, unknown>).b as unknown[]).push(cyclic);
    const error = refusal(() => stableKey(cyclic));
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe('Cannot compare a value with a cycle (at a.b[0]).');
    const shared = { x: [1] };
    expect(stableKey({ p: shared, q: shared })).toBe('{"p":{"x":[1]},"q":{"x":[1]}}');
    // The same object is equal to itself, even with a cycle that a key could not describe.
    expect(structuralEqual(cyclic, cyclic)).toBe(true);
  });
});

describe('plainEqual and cloneJson, as the known-row check of an append and its slot use them', () => {
  it('agrees with structuralEqual on JSON values, and holds a value equal to its copy', () => {
    // -0 and 0 are one JSON number; NaN never reaches JSON. Two values from one pool are often equal.
    const value = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.parse(JSON.stringify(v)) as JsonValue);
    const pair = fc.oneof(fc.tuple(value, value), value.map((v) => [v, cloneJson(v)] as const));
    fc.assert(
      fc.property(pair, ([a, b]) => {
        expect(plainEqual(a, b)).toBe(structuralEqual(a, b));
        expect(plainEqual(b, a)).toBe(plainEqual(a, b));
        expect(plainEqual(a, cloneJson(a))).toBe(true);
      }),
      fcParams(300),
    );
  });

  it('equal exactly when every field is, whatever the key order; in doubt, unequal (a retry, never a stale row kept)', () => {
    expect(plainEqual({ a: 1, b: [1, { c: null }] }, { b: [1, { c: null }], a: 1 })).toBe(true);
    expect(plainEqual({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(plainEqual({ a: 1, b: undefined }, { a: 1 })).toBe(false);
    expect(plainEqual({ a: undefined }, { b: undefined })).toBe(false);
    expect(plainEqual([1, 2], { 0: 1, 1: 2 })).toBe(false);
    expect(plainEqual({ 0: 1, 1: 2 }, [1, 2])).toBe(false);
    expect(plainEqual({ a: [1, 2] }, { a: [1, 2, 3] })).toBe(false);
    expect(plainEqual([1, 2], [1, 3])).toBe(false);
    expect(plainEqual({ a: 1 }, { b: 1 })).toBe(false);
    expect(plainEqual({ a: 1 }, { a: 2 })).toBe(false);
    expect(plainEqual({ a: { b: { c: 1 } } }, { a: { b: { c: 2 } } })).toBe(false);
    expect(plainEqual('1', 1)).toBe(false);
    expect(plainEqual(null, {})).toBe(false);
    expect(plainEqual({}, null)).toBe(false);
    // Not plain data: equal only to itself.
    expect(plainEqual(new Date(1), new Date(1))).toBe(false);
    expect(plainEqual(new Date(1), {})).toBe(false);
    expect(plainEqual({}, new Date(1))).toBe(false);
    expect(plainEqual(Object.create(null), {})).toBe(true);
    expect(plainEqual(Number.NaN, Number.NaN)).toBe(false);
  });

  it('the copy shares no object or array with the original, so the ops may change it while the check compares with the original', () => {
    const row = { a: 1, nested: { list: [1, { deep: 'x' }] }, none: null, missing: undefined };
    const copy = cloneJson(row as unknown as JsonValue) as unknown as typeof row;
    expect(plainEqual(copy, row)).toBe(true);
    copy.nested.list.push(2);
    (copy.nested.list[1] as { deep: string }).deep = 'y';
    expect(row).toEqual({ a: 1, nested: { list: [1, { deep: 'x' }] }, none: null, missing: undefined });
    expect('missing' in copy).toBe(true);
  });
});
