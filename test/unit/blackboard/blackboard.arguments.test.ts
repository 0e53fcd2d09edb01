/**
 * Every Blackboard method, called with every kind of wrong argument (null,
 * undefined, number, NaN, string, array, Map, Date, function, object, cyclic,
 * deeply nested: the shared list of test/unit/wrong-values.ts),
 * throws a TabulaError with a code and changes nothing: not the content,
 * not the document (no Yjs update is emitted). Seeded with fast-check;
 * TABULA_SEED=n replays a reported seed.
 */
import * as fc from 'fast-check';
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { createBlackboard, isTabulaError, type Blackboard, type JsonValue } from '../../../src/index.js';
import { fcParams, TEST_SEED } from '../seed.js';
import { WRONG_VALUES, wrongValuesExcept, type WrongKind } from '../wrong-values.js';

const seed = TEST_SEED;

function cyclic(): Record<string, unknown> {
  const value: Record<string, unknown> = { a: 1 };
  value.self = value;
  return value;
}

type Wrong = { name: string; make: () => unknown };
const except = (...kinds: WrongKind[]): Wrong[] => wrongValuesExcept(...kinds).map((wrong) => ({ name: wrong.kind, make: wrong.make }));
/** Wrong as a key: anything but a non-empty string. */
const wrongKeys: Wrong[] = [...except('string'), { name: 'empty string', make: () => '' }];
/** Wrong as a value: not JSON (null, numbers, strings, arrays and plain objects of JSON are JSON). */
const wrongValues: Wrong[] = except('null', 'number', 'string', 'array', 'object');
/** Wrong as update()'s argument: anything but a plain object of JSON values (`object` is one). */
const wrongRecords: Wrong[] = [
  ...except('object'),
  { name: 'cyclic record', make: () => ({ ok: 1, bad: cyclic() }) },
  { name: 'record with a deep value', make: () => ({ ok: 1, bad: WRONG_VALUES.find((w) => w.kind === 'deep object')!.make() }) },
  { name: 'record with undefined', make: () => ({ ok: 1, bad: undefined }) },
];
const notFunctions: Wrong[] = except('function');

type Call = { method: string; wrong: Wrong; run: (board: Blackboard, arg: unknown) => unknown };
const calls: Call[] = [
  ...wrongKeys.map((wrong) => ({ method: 'get(key)', wrong, run: (b: Blackboard, a: unknown) => b.get(a as string) })),
  ...wrongKeys.map((wrong) => ({ method: 'has(key)', wrong, run: (b: Blackboard, a: unknown) => b.has(a as string) })),
  ...wrongKeys.map((wrong) => ({ method: 'delete(key)', wrong, run: (b: Blackboard, a: unknown) => b.delete(a as string) })),
  ...wrongKeys.map((wrong) => ({ method: 'set(key, 1)', wrong, run: (b: Blackboard, a: unknown) => b.set(a as string, 1) })),
  ...wrongValues.map((wrong) => ({ method: 'set("k", value)', wrong, run: (b: Blackboard, a: unknown) => b.set('k', a as JsonValue) })),
  ...wrongRecords.map((wrong) => ({ method: 'update(values)', wrong, run: (b: Blackboard, a: unknown) => b.update(a as Record<string, JsonValue>) })),
  ...notFunctions.map((wrong) => ({ method: 'transact(fn)', wrong, run: (b: Blackboard, a: unknown) => b.transact(a as () => void) })),
  ...notFunctions.map((wrong) => ({ method: 'observe(listener)', wrong, run: (b: Blackboard, a: unknown) => b.observe(a as () => void) })),
];

const jsonValue = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue>;
// `__proto__` is refused as a key everywhere (its own test covers that); generated content must be storable.
const withoutProtoKey = (content: Record<string, JsonValue>): boolean => !JSON.stringify(content).includes('"__proto__"');

describe('Blackboard: wrong arguments (class-wide, seeded)', () => {
  it(`every method refuses every wrong argument with a TabulaError and changes nothing (seed ${seed})`, () => {
    console.log(`[blackboard arguments] seed ${seed} (replay with TABULA_SEED=${seed})`);
    fc.assert(
      // Every (method, wrong argument) pair on every generated board: random content, exhaustive calls.
      fc.property(fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), jsonValue, { maxKeys: 5 }).filter(withoutProtoKey), (content) => {
        for (const call of calls) {
          const doc = new Y.Doc();
          const board = createBlackboard({ doc });
          board.update(content);
          const before = board.toJSON();
          let updates = 0;
          doc.on('update', () => updates++);
          let thrown: unknown = null;
          try {
            call.run(board, call.wrong.make());
          } catch (error) {
            thrown = error;
          }
          const what = `${call.method} with ${call.wrong.name}`;
          expect(isTabulaError(thrown), `${what} threw ${String(thrown)}`).toBe(true);
          expect(['argument/invalid', 'schema/invalid'], what).toContain((thrown as { code: string }).code);
          expect(board.toJSON(), what).toEqual(before);
          expect(updates, `${what} emitted a Yjs update`).toBe(0);
        }
      }),
      fcParams(25),
    );
  }, 120_000);

  it('covers every method of the Blackboard interface', () => {
    const methods = new Set(calls.map((c) => c.method.replace(/\(.*/, '')));
    const board = createBlackboard({ doc: new Y.Doc() });
    const argumentTaking = Object.keys(board).filter((k) => typeof (board as unknown as Record<string, unknown>)[k] === 'function' && !['keys', 'toJSON', 'flushed'].includes(k));
    expect([...methods].sort()).toEqual(argumentTaking.sort());
  });
});
