/**
 * The argument checks of the Blackboard API, without Yjs: the board over a
 * Y.Doc (blackboard.ts) and the stand-in used while Yjs loads (lazy.ts)
 * refuse the same arguments with the same errors.
 */
import { isPlainObject } from '../core/args.js';
import { TabulaError } from '../core/errors.js';
import { assertJsonValue, assertSafeKey, cloneJson, type JsonValue } from '../core/json.js';

/** A JSON copy of `value`, or `schema/invalid` naming the key (nesting capped before Yjs encodes it). */
export function checkValue(key: string, value: unknown): JsonValue {
  // The JSON check caps nesting (MAX_JSON_DEPTH) before Yjs sees the value: Yjs encodes recursively and
  // a value thousands deep would overflow the stack half-way through a transaction.
  return cloneJson(assertJsonValue(value, `blackboard key ${JSON.stringify(key)}`));
}

/** A short, never-throwing description of a wrong argument (JSON.stringify throws on cycles and BigInt). */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an object (${Object.prototype.toString.call(value).slice(8, -1)})`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  return `${typeof value} ${value === undefined ? '' : (value as number | boolean | bigint).toString()}`.trim();
}

/** The key, or `argument/invalid` for an empty or non-string key (and `__proto__`-like keys, see assertSafeKey). */
export function checkKey(key: unknown): string {
  if (typeof key !== 'string' || key === '') {
    throw new TabulaError('argument/invalid', `A blackboard key must be a non-empty string, got ${describe(key)}.`);
  }
  return assertSafeKey(key, 'blackboard key');
}

/** The checked [key, copy] pairs of an update(); `update()` of anything but a plain object is refused. */
export function checkEntries(values: unknown): (readonly [string, JsonValue])[] {
  if (!isPlainObject(values)) {
    throw new TabulaError('argument/invalid', `blackboard.update() takes a plain object of key → JSON value, got ${describe(values)}.`);
  }
  return Object.entries(values).map(([key, value]) => [checkKey(key), checkValue(key, value)] as const);
}

/** `fn`, or `argument/invalid` naming the method (`transact`, `observe`) and what it takes. */
export function checkFunction<F>(fn: F, method: 'transact' | 'observe'): F {
  if (typeof fn !== 'function') {
    throw new TabulaError('argument/invalid', `blackboard.${method}() takes ${method === 'observe' ? 'a listener function' : 'a function'}, got ${describe(fn)}.`);
  }
  return fn;
}
