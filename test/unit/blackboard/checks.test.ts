/**
 * The argument checks of the Blackboard API (src/blackboard/checks.ts), as
 * a caller meets them: what each refusal says about the wrong argument (so
 * the developer can tell what they passed), and that plain objects without
 * a prototype are accepted as update() records.
 */
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { createBlackboard, type Blackboard, type JsonValue } from '../../../src/index.js';

const board = (): Blackboard => createBlackboard({ doc: new Y.Doc() });

/** The message of what `fn` throws (it must throw a TabulaError with `code`). */
function refusal(fn: () => unknown, code = 'argument/invalid'): string {
  try {
    fn();
  } catch (error) {
    expect(error).toMatchObject({ code });
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('blackboard argument checks', () => {
  it('names what a wrong key was', () => {
    const b = board();
    const keyRefusal = (key: unknown) => refusal(() => b.set(key as string, 1));
    const expected: [unknown, string][] = [
      [null, 'null'],
      [undefined, 'undefined'],
      [42, 'number 42'],
      [true, 'boolean true'],
      [10n, 'bigint 10'],
      [['k'], 'an array'],
      [{ k: 1 }, 'an object (Object)'],
      [new Map(), 'an object (Map)'],
      [() => 'k', 'a function'],
      [Symbol('k'), 'a symbol'],
      ['', '""'],
    ];
    for (const [key, described] of expected) {
      expect(keyRefusal(key)).toBe(`A blackboard key must be a non-empty string, got ${described}.`);
    }
    for (const call of [() => b.get(7 as never), () => b.has(7 as never), () => b.delete(7 as never)]) {
      expect(refusal(call)).toBe('A blackboard key must be a non-empty string, got number 7.');
    }
  });

  it('names the blackboard key when it refuses a key that would reach the prototype', () => {
    expect(refusal(() => board().set('__proto__', 1), 'schema/invalid')).toMatch(/^blackboard key: .+\.$/);
  });

  it('quotes a wrong string argument, cut after 40 characters', () => {
    const b = board();
    const forty = 'x'.repeat(40);
    expect(refusal(() => b.transact(forty as never))).toBe(`blackboard.transact() takes a function, got "${forty}".`);
    expect(refusal(() => b.transact(`${forty}y` as never))).toBe(`blackboard.transact() takes a function, got "${forty}…".`);
  });

  it('says what observe(), transact() and update() take', () => {
    const b = board();
    expect(refusal(() => b.observe(1 as never))).toBe('blackboard.observe() takes a listener function, got number 1.');
    expect(refusal(() => b.transact(null as never))).toBe('blackboard.transact() takes a function, got null.');
    expect(refusal(() => b.update(new Date(0) as never))).toBe('blackboard.update() takes a plain object of key → JSON value, got an object (Date).');
    expect(refusal(() => b.update('k' as never))).toBe('blackboard.update() takes a plain object of key → JSON value, got "k".');
    expect(refusal(() => b.update(null as never))).toBe('blackboard.update() takes a plain object of key → JSON value, got null.');
  });

  it('refuses a bad key or value inside update(), naming it, and sets nothing', () => {
    const b = board();
    expect(refusal(() => b.update({ ok: 1, bad: NaN }), 'schema/invalid')).toContain('blackboard key "bad"');
    expect(refusal(() => b.update({ ok: 1, '': 2 }))).toBe('A blackboard key must be a non-empty string, got "".');
    expect(b.toJSON()).toEqual({});
  });

  it('takes a record without a prototype as it takes a literal', () => {
    const b = board();
    const record = Object.assign(Object.create(null) as Record<string, JsonValue>, { a: 1, b: { c: [2] } });
    b.update(record);
    expect(b.toJSON()).toEqual({ a: 1, b: { c: [2] } });
    // A class instance is not a record, even one with own enumerable fields.
    class Point {
      x = 1;
    }
    expect(refusal(() => b.update(new Point() as never))).toBe('blackboard.update() takes a plain object of key → JSON value, got an object (Object).');
  });
});
