/**
 * Argument checks shared by the public API: options objects, iterables and
 * plain objects, so that a wrong-type argument is refused with an
 * `argument/invalid` that names it, and never reaches code that would
 * throw a raw `TypeError` on it.
 */
import { TabulaError } from './errors.js';

/**
 * True for `{}`-style objects: JSON data's objects, the one plain-object test of every module.
 *
 * A plain object's prototype is `Object.prototype` of some realm (an iframe's, a vm context's, a
 * library's that built it there) or null. Its own enumerable keys are its data, as for
 * `JSON.stringify`, whichever realm made it; comparing with our own `Object.prototype` would refuse
 * such an object in one method and accept it, nested one level down, in the next.
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** A value as a person reads it in an error message; never throws (cycles, bigints, deep nesting). */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  switch (typeof value) {
    case 'string':
      return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
    case 'number':
    case 'boolean':
    case 'bigint':
    case 'undefined':
      return String(value);
    case 'function':
      return 'a function';
    case 'symbol':
      return 'a symbol';
    default: {
      if (isPlainObject(value)) return 'an object';
      const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
      return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an object with a custom prototype';
    }
  }
}

/** An options argument: `undefined` is `{}`, a plain object is itself; anything else throws `argument/invalid` naming `what`. */
export function checkOptions<T extends object>(value: T | undefined, what: string): Partial<T> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new TabulaError('argument/invalid', `${what} takes an options object or nothing, got ${describeValue(value)}.`);
  return value;
}

/** A plain-object argument (a map of keys to values); anything else throws `argument/invalid` naming `what`. */
export function checkRecord(value: unknown, what: string): Record<string, unknown> {
  if (!isPlainObject(value)) throw new TabulaError('argument/invalid', `${what} takes a plain object, got ${describeValue(value)}.`);
  return value;
}

/** An iterable argument (an array, a Set, a generator…); anything else throws `argument/invalid` naming `what`. */
export function checkIterable<T>(value: Iterable<T>, what: string): Iterable<T> {
  if (typeof value === 'string' || typeof (value as { [Symbol.iterator]?: unknown } | null | undefined)?.[Symbol.iterator] !== 'function') {
    throw new TabulaError('argument/invalid', `${what} takes an array (or another iterable), got ${describeValue(value)}.`);
  }
  return value;
}
