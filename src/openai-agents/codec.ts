/**
 * Agent items ↔ stored JSON, and the keys they are stored under. Pure.
 *
 * Items are JSON except for binary file and image data (`Uint8Array`),
 * which is stored as `{ "$bytes": base64 }`. Fields whose value is
 * `undefined` are dropped, as JSON would drop them.
 *
 * The integration uses only the public entry points (ESLint enforces it), so
 * the hash of its keys and digests is written out here.
 */
import { TabulaError, type JsonValue } from '../index.js';

/**
 * A 64-bit FNV-style hash of `text` (its UTF-16 code units) as 16 lowercase hex digits, for keys and
 * digests. Stored keys and digests depend on it, so it must never change: a test holds it to the values
 * it has always given.
 */
export function shortHash(text: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) >>> 0;
    h2 = (h2 ^ (h1 >>> 13)) >>> 0;
  }
  return h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0');
}

const BYTES = '$bytes';

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** An item (or any part of it) as stored JSON; throws `argument/invalid` naming the path of what cannot be stored. */
export function encodeItem(value: unknown, path = 'item'): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return value;
  } else if (value instanceof Uint8Array) {
    return { [BYTES]: toBase64(value) };
  } else if (Array.isArray(value)) {
    return value.map((entry, index) => (entry === undefined ? null : encodeItem(entry, `${path}[${index}]`)));
  } else if (typeof value === 'object' && (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null)) {
    const out: Record<string, JsonValue> = {};
    for (const [key, entry] of Object.entries(value)) if (entry !== undefined) out[key] = encodeItem(entry, `${path}.${key}`);
    return out;
  }
  throw new TabulaError(
    'argument/invalid',
    `${path} cannot be stored: ${typeof value === 'object' ? 'a class instance' : typeof value === 'number' ? String(value) : `a ${typeof value}`} is not JSON or bytes. Agent items must be plain JSON (Uint8Array allowed for file data).`,
  );
}

/** The inverse of {@link encodeItem}. */
export function decodeItem(value: JsonValue): unknown {
  if (Array.isArray(value)) return value.map(decodeItem);
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === BYTES && typeof value[BYTES] === 'string') return fromBase64(value[BYTES]);
    const out: Record<string, unknown> = {};
    for (const key of keys) out[key] = decodeItem(value[key] as JsonValue);
    return out;
  }
  return value;
}

const TIME_DIGITS = 9;
const SEQ_DIGITS = 4;

/**
 * Item keys sort in history order: `i:` + time (ms, base 36) + a sequence
 * number within that millisecond + the writer's tag. A new key always sorts
 * after `last`, even when this clock is behind the writer of `last`; two
 * devices appending at once get distinct keys that interleave by time.
 */
export function nextItemKeys(last: string | undefined, count: number, tag: string, nowMs: number): string[] {
  let time = nowMs;
  let seq = 0;
  if (last !== undefined) {
    const lastTime = parseInt(last.slice(2, 2 + TIME_DIGITS), 36);
    const lastSeq = parseInt(last.slice(2 + TIME_DIGITS, 2 + TIME_DIGITS + SEQ_DIGITS), 36);
    if (lastTime >= time) {
      time = lastTime;
      seq = lastSeq + 1;
    }
  }
  const out: string[] = [];
  for (let i = 0; i < count; i++, seq++) {
    if (seq >= 36 ** SEQ_DIGITS) {
      time += 1;
      seq = 0;
    }
    out.push(`${ITEM_PREFIX}${time.toString(36).padStart(TIME_DIGITS, '0')}${seq.toString(36).padStart(SEQ_DIGITS, '0')}${tag}`);
  }
  return out;
}

export const ITEM_PREFIX = 'i:';
export const OPERATION_PREFIX = 'op:';
/** Keys of the records of the chat messages that stand for item groups: `c:` + the group's first item key. */
export const CHAT_PREFIX = 'c:';

/** The key of an applied history transaction. */
export function operationKey(operationId: string): string {
  return /^[\w.-]{1,100}$/.test(operationId) ? `${OPERATION_PREFIX}${operationId}` : `${OPERATION_PREFIX}#${shortHash(operationId)}`;
}
