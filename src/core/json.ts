/**
 * JSON values: the one data shape Tabula stores, syncs and hands across
 * tabs. This module owns the JsonValue type and its validator, deep freezing,
 * copying, and a stable structural key used for equality and memo caches.
 *
 * The validator is hand-written rather than a recursive zod union because it
 * must name the exact path of a bad value (a `Date`, `NaN`, a cycle) and it
 * runs on every write; it is wrapped as a zod schema for the boundaries.
 */
import * as z from 'zod/mini';
import { isPlainObject } from './args.js';
import { TabulaError, formatPath, type ValidationIssue } from './errors.js';

/** A value that survives `JSON.stringify` / `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object: the shape of a scratchpad, a memory namespace, a state field. */
export type JsonObject = { [key: string]: JsonValue };

function describeKind(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value !== 'object' || value === null) return typeof value;
  const ctor = (value as { constructor?: { name?: unknown } }).constructor;
  return typeof ctor?.name === 'string' && ctor.name !== '' ? `an instance of ${ctor.name}` : 'an object with a custom prototype';
}

/**
 * The deepest nesting of arrays and objects Tabula accepts. Deeper values
 * overflow the stack of recursive code this value later meets (structured
 * clone, JSON.stringify, Yjs encoding), so they are refused up front with a
 * `schema/invalid` instead of surfacing as a `RangeError` half-way through a write.
 */
export const MAX_JSON_DEPTH = 512;

/**
 * Why `key` cannot be a key of a Tabula object or key-value store, or null
 * when it can. The one rule: `__proto__` is refused everywhere (JSON values,
 * memory, blackboard, contexts, state, imports). As an object key it is
 * either dropped or turns into the object's prototype depending on how the
 * object was built (`JSON.parse` vs assignment, zod, Yjs' `toJSON()`), so no
 * single behaviour could be kept through every copy a value goes through.
 */
export function findKeyProblem(key: string): string | null {
  return key === '__proto__' ? 'the key "__proto__" is refused: it would replace the prototype of objects built from it; rename the key' : null;
}

/**
 * Returns `key`, or throws `schema/invalid` naming `what` when
 * {@link findKeyProblem} refuses it. Every map-like API calls this on its keys.
 */
export function assertSafeKey(key: string, what: string): string {
  const problem = findKeyProblem(key);
  if (problem) throw new TabulaError('schema/invalid', `${what}: ${problem}.`, { issues: [{ path: [key], code: 'custom', message: problem }] });
  return key;
}

/**
 * The first place where `value` stops being JSON, or null when it is JSON
 * all the way down. Rejects `undefined`, functions, symbols, bigints,
 * non-finite numbers, class instances (Date, Map…), sparse arrays, cycles,
 * the key `__proto__` (see {@link findKeyProblem}) and nesting deeper than
 * {@link MAX_JSON_DEPTH}.
 */
export function findJsonProblem(value: unknown): ValidationIssue | null {
  const path: PropertyKey[] = [];
  const ancestors = new Set<object>();

  const visit = (current: unknown): ValidationIssue | null => {
    switch (typeof current) {
      case 'string':
      case 'boolean':
        return null;
      case 'number':
        return Number.isFinite(current)
          ? null
          : { path: [...path], code: 'custom', message: `${describeKind(current)} is not a JSON number` };
      case 'object': {
        if (current === null) return null;
        if (ancestors.has(current)) {
          return { path: [...path], code: 'custom', message: 'circular reference: JSON cannot contain cycles' };
        }
        if (ancestors.size >= MAX_JSON_DEPTH) {
          return { path: [...path], code: 'custom', message: `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects` };
        }
        const isArray = Array.isArray(current);
        if (!isArray && !isPlainObject(current)) {
          return {
            path: [...path],
            code: 'custom',
            message: `${describeKind(current)} is not JSON; store a plain object, array or primitive (e.g. a date as an ISO string)`,
          };
        }
        ancestors.add(current);
        if (isArray) {
          for (let index = 0; index < current.length; index++) {
            if (!(index in current)) {
              ancestors.delete(current);
              return { path: [...path, index], code: 'custom', message: 'hole in a sparse array is not JSON' };
            }
            path.push(index);
            const problem = visit(current[index]);
            path.pop();
            if (problem) return problem;
          }
        } else {
          for (const key of Object.keys(current)) {
            const keyProblem = findKeyProblem(key);
            if (keyProblem) {
              ancestors.delete(current);
              return { path: [...path, key], code: 'custom', message: keyProblem };
            }
            path.push(key);
            const problem = visit(current[key]);
            path.pop();
            if (problem) return problem;
          }
        }
        ancestors.delete(current);
        return null;
      }
      default:
        return { path: [...path], code: 'custom', message: `${describeKind(current)} is not JSON` };
    }
  };

  return visit(value);
}

/** True when `value` is JSON all the way down (see {@link findJsonProblem}). */
export function isJsonValue(value: unknown): value is JsonValue {
  return findJsonProblem(value) === null;
}

/** The zod schema for {@link JsonValue}; its issues carry the exact path of the bad value. */
export const JsonValueSchema: z.ZodMiniType<JsonValue> = z.custom<JsonValue>().check(
  z.superRefine((value, ctx) => {
    const problem = findJsonProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', path: [...problem.path], message: problem.message });
  }),
);

/**
 * Returns `value` typed as JSON, or throws `schema/invalid` saying which
 * field of what is not JSON. `what` names the thing for the message, e.g.
 * `scratchpad key "plan"`.
 */
export function assertJsonValue(value: unknown, what: string): JsonValue {
  const problem = findJsonProblem(value);
  if (problem) {
    throw new TabulaError(
      'schema/invalid',
      `${what} is not a JSON value: at ${formatPath(problem.path)}, ${problem.message}.`,
      { issues: [problem] },
    );
  }
  return value as JsonValue;
}

/** A deep copy of a JSON value; the copy shares nothing with the original. */
export function cloneJson<T extends JsonValue>(value: T): T {
  return copyJson(value) as T;
}

function copyJson(value: JsonValue): JsonValue {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyJson);
  const out: JsonObject = {};
  for (const [key, item] of Object.entries(value)) {
    // `out.__proto__ = x` would replace the prototype; JSON.parse makes it an own key, and so do we.
    if (key === '__proto__') Object.defineProperty(out, key, { value: copyJson(item), enumerable: true, writable: true, configurable: true });
    else out[key] = copyJson(item);
  }
  return out;
}

/**
 * True when `a` and `b` are equal plain data: primitives by `===`, arrays item by item, plain objects
 * key by key whatever the key order. Any other object (a Date, a Map, a class instance) is equal only
 * to itself, and NaN to nothing. It errs towards "unequal", for callers to whom a wrong "unequal" costs
 * a retry and a wrong "equal" is a bug (the known-row check of an append, see store/known-rows.ts);
 * a fraction of {@link structuralEqual}'s cost, which encodes and sorts both values.
 */
export function plainEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let index = 0; index < a.length; index++) if (!plainEqual(a[index], b[index])) return false;
    return true;
  }
  if (Array.isArray(b) || !isPlainObject(a) || !isPlainObject(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    if (!Object.hasOwn(b, key) || !plainEqual(a[key], b[key])) return false;
  }
  return true;
}

/** A type whose every nested property is readonly. */
export type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/**
 * Freezes `value` and every object and array reachable from it, in place,
 * and returns it. Already-frozen subtrees are skipped, so re-freezing a
 * snapshot is cheap. Primitives and functions are returned as they are: it
 * freezes data, not code.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const key of Reflect.ownKeys(value)) {
    deepFreeze((value as Record<PropertyKey, unknown>)[key]);
  }
  return value;
}

/**
 * A string that is equal for two values exactly when they are structurally
 * equal: object keys, Map entries and Set members are sorted, so insertion
 * order does not matter. For a JSON value it is the value's JSON text with
 * object keys sorted (digests stored by the integrations depend on this).
 *
 * Beyond JSON it accepts what journal entries may hold: `undefined`,
 * bigints, Dates, Maps, Sets and class instances (compared by constructor
 * name and own enumerable properties). Functions and symbols compare by
 * name only, which is as far as structure goes for them. Every name is
 * quoted like a key: a name holding `),#symbol(` must not read as more
 * structure, or two different values would share a key.
 */
export function stableKey(value: unknown): string {
  const ancestors = new Set<object>();
  const path: PropertyKey[] = [];

  const encode = (current: unknown): string => {
    switch (typeof current) {
      case 'string':
        return JSON.stringify(current);
      case 'number':
        // JSON.stringify turns NaN and ±Infinity into null; keep them apart.
        return Number.isFinite(current) ? JSON.stringify(current) : `#${String(current)}`;
      case 'boolean':
        return current ? 'true' : 'false';
      case 'undefined':
        return '#undefined';
      case 'bigint':
        return `#${current}n`;
      case 'symbol':
        return `#symbol(${JSON.stringify(current.description ?? '')})`;
      case 'function':
        return `#function(${JSON.stringify(current.name)})`;
      case 'object': {
        if (current === null) return 'null';
        if (ancestors.has(current)) {
          throw new TabulaError('argument/invalid', `Cannot compare a value with a cycle (at ${formatPath(path)}).`);
        }
        ancestors.add(current);
        try {
          return encodeObject(current);
        } finally {
          ancestors.delete(current);
        }
      }
    }
  };

  const encodeEntries = (entries: Iterable<readonly [string, unknown]>): string => {
    const parts: string[] = [];
    for (const [key, item] of entries) {
      path.push(key);
      parts.push(`${JSON.stringify(key)}:${encode(item)}`);
      path.pop();
    }
    return parts.join(',');
  };

  const encodeObject = (current: object): string => {
    if (Array.isArray(current)) {
      const parts: string[] = [];
      for (let index = 0; index < current.length; index++) {
        path.push(index);
        parts.push(encode(current[index]));
        path.pop();
      }
      return `[${parts.join(',')}]`;
    }
    if (current instanceof Date) return `#Date(${current.getTime()})`;
    if (current instanceof Map) {
      // Whole entries are sorted, not keys alone: two keys can be equal in structure ({} and {}), and
      // sorting by key would leave their entries in insertion order.
      const entries = [...current.entries()].map(([k, v]) => encodeEntries([[encode(k), v]]));
      return `#Map{${entries.sort().join(',')}}`;
    }
    if (current instanceof Set) {
      const members = [...current].map((member) => encode(member)).sort();
      return `#Set[${members.join(',')}]`;
    }
    const keys = Object.keys(current).sort();
    const body = encodeEntries(keys.map((key) => [key, (current as Record<string, unknown>)[key]] as const));
    if (isPlainObject(current)) return `{${body}}`;
    return `#${JSON.stringify(describeKind(current))}{${body}}`;
  };

  return encode(value);
}

/** Structural equality, consistent with {@link stableKey}. */
export function structuralEqual(a: unknown, b: unknown): boolean {
  return a === b || stableKey(a) === stableKey(b);
}
