/**
 * lib0's `writeAny` values, as ContentAny items carry them: skipped (checked to decode, nested at most
 * `MAX_JSON_DEPTH` deep) or built, for the blackboard map's values the JSON check then reads. It owns the
 * encoding and the depth bound; whether a built value is JSON is `findJsonProblem`'s to say (json.ts).
 */
import { MAX_JSON_DEPTH } from '../json.js';
import type { ByteReader } from './bytes.js';
import { malformed, refused } from './problem.js';

/** Reads one value without building it. */
export function skipAny(reader: ByteReader): void {
  readAny(reader, false, 0, null);
}

/** Reads one value and builds it, for the blackboard key `key` (named when the value nests too deep). */
export function buildAny(reader: ByteReader, key: string): unknown {
  return readAny(reader, true, 0, key);
}

/**
 * Reads one value of lib0's `writeAny` encoding, `depth` arrays and objects deep; returns it built
 * (object keys `__proto__` as own keys, so the JSON check sees them) when `build`, else undefined.
 * `key`: the blackboard key whose value is being read, for messages; null outside one.
 */
function readAny(reader: ByteReader, build: boolean, depth: number, key: string | null): unknown {
  const at = reader.pos;
  const type = reader.byte('a value');
  switch (type) {
    case 127:
      return undefined;
    case 126:
      return null;
    case 125:
      return reader.varInt();
    case 124:
      reader.skip(4, 'a float32');
      return build ? reader.view().getFloat32(at + 1) : undefined;
    case 123:
      reader.skip(8, 'a float64');
      return build ? reader.view().getFloat64(at + 1) : undefined;
    case 122:
      reader.skip(8, 'a bigint');
      return build ? reader.view().getBigInt64(at + 1) : undefined;
    case 121:
      return false;
    case 120:
      return true;
    case 119:
      if (!build) {
        reader.skipString();
        return undefined;
      }
      return reader.readString();
    case 118: {
      const size = reader.uint('an object size');
      nest(depth, at, key);
      if (!build) {
        for (let i = 0; i < size; i++) {
          reader.skipString();
          readAny(reader, false, depth + 1, key);
        }
        return undefined;
      }
      const object: Record<string, unknown> = {};
      for (let i = 0; i < size; i++) {
        const name = reader.readString();
        const value = readAny(reader, true, depth + 1, key);
        // lib0 assigns, which for "__proto__" replaces the prototype; an own key lets the JSON check refuse it.
        if (name === '__proto__') Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
        else object[name] = value;
      }
      return object;
    }
    case 117: {
      const length = reader.uint('an array length');
      nest(depth, at, key);
      const array: unknown[] | undefined = build ? [] : undefined;
      for (let i = 0; i < length; i++) {
        const value = readAny(reader, build, depth + 1, key);
        array?.push(value);
      }
      return array;
    }
    case 116: {
      const length = reader.uint('a byte array length');
      const start = reader.pos;
      reader.skip(length, 'a byte array');
      return build ? reader.subarray(start, start + length) : undefined;
    }
    default:
      throw malformed(at, `value type ${type}`);
  }
}

/** Refuses an array or object at `at` that would sit `depth` levels deep, past the bound. */
function nest(depth: number, at: number, key: string | null): void {
  if (depth < MAX_JSON_DEPTH) return;
  const what = `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;
  if (key !== null) throw refused(`key ${JSON.stringify(key)} would hold a value that is not JSON (${what})`);
  throw refused(`it holds a value ${what} (at byte ${at})`);
}
