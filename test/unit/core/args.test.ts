/**
 * The argument checks every public API runs first: a wrong-type argument is
 * refused with an `argument/invalid` naming the argument and what was given,
 * and never reaches code that would throw a raw TypeError.
 */
import { describe, expect, it } from 'vitest';
import { checkIterable, checkOptions, checkRecord, describeValue, isPlainObject } from '../../../src/core/args.js';
import { wrongValuesExcept } from '../wrong-values.js';
import { refusal } from './refusal.js';

describe('isPlainObject', () => {
  it('accepts {} and null-prototype objects', () => {
    expect(isPlainObject({})).toBe(true);
    expect(isPlainObject(Object.create(null))).toBe(true);
  });

  // The shared wrong values (test/unit/wrong-values.ts) but the plain objects among them, and an empty array.
  it.each([
    ...wrongValuesExcept('object', 'cyclic', 'cyclic content', 'deep object').map((wrong) => [wrong.kind, wrong.make()]),
    ['an empty array', []],
    ['a class instance', new (class Point {})()],
  ])('refuses %s', (_label, value) => {
    expect(isPlainObject(value)).toBe(false);
  });
});

describe('describeValue', () => {
  class Point {}
  it.each([
    [null, 'null'],
    [undefined, 'undefined'],
    [[1, 2, 3], 'an array of 3'],
    ['', '""'],
    ['short', '"short"'],
    ['x'.repeat(40), JSON.stringify('x'.repeat(40))],
    ['x'.repeat(41), 'a string of 41 characters'],
    [42, '42'],
    [NaN, 'NaN'],
    [false, 'false'],
    [10n, '10'],
    [() => 1, 'a function'],
    [Symbol('s'), 'a symbol'],
    [{ a: 1 }, 'an object'],
    [Object.create(null), 'an object'],
    [new Point(), 'an instance of Point'],
    [new Map(), 'an instance of Map'],
    [new ((() => class {})())(), 'an object with a custom prototype'],
    [Object.create(Object.create(Object.create(null) as object) as object), 'an object with a custom prototype'],
  ])('describes %s as %s', (value, expected) => {
    expect(describeValue(value)).toBe(expected);
  });

  it('never throws, even on a cycle', () => {
    const cyclic: unknown[] = [];
    cyclic.push(cyclic);
    expect(describeValue(cyclic)).toBe('an array of 1');
  });
});

describe('checkOptions and checkRecord', () => {
  it('take undefined as {} and a plain object as itself', () => {
    const options = { limit: 3 };
    expect(checkOptions(options, 'fork()')).toBe(options);
    expect(checkOptions(undefined, 'fork()')).toEqual({});
    expect(checkRecord(options, 'setState()')).toBe(options);
  });

  it('refuse anything else, naming the call and what it got', () => {
    const options = refusal(() => checkOptions([1], 'fork()'));
    expect(options.code).toBe('argument/invalid');
    expect(options.message).toBe('fork() takes an options object or nothing, got an array of 1.');
    expect(refusal(() => checkOptions(null as unknown as object, 'fork()')).message).toBe('fork() takes an options object or nothing, got null.');
    const record = refusal(() => checkRecord('x', 'setState()'));
    expect(record.code).toBe('argument/invalid');
    expect(record.message).toBe('setState() takes a plain object, got "x".');
    expect(refusal(() => checkRecord(undefined, 'setState()')).message).toBe('setState() takes a plain object, got undefined.');
  });
});

describe('checkIterable', () => {
  it('takes arrays, Sets and generators as they are', () => {
    const list = [1];
    expect(checkIterable(list, 'append()')).toBe(list);
    const set = new Set([1]);
    expect(checkIterable(set, 'append()')).toBe(set);
    function* generate(): Generator<number> {
      yield 1;
    }
    expect([...checkIterable(generate(), 'append()')]).toEqual([1]);
  });

  it.each([
    ['a string (iterable, but of characters)', 'abc', '"abc"'],
    ['null', null, 'null'],
    ['undefined', undefined, 'undefined'],
    ['a plain object', { 0: 'a', length: 1 }, 'an object'],
    ['a number', 3, '3'],
  ])('refuses %s, naming the call and what it got', (_label, value, shown) => {
    const error = refusal(() => checkIterable(value as unknown as Iterable<unknown>, 'append()'));
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe(`append() takes an array (or another iterable), got ${shown}.`);
  });
});
