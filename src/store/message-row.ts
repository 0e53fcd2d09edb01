/**
 * The check of a message row read from IndexedDB, written out by hand for the
 * rows every read returns: `messages({ last: 50 })` spent 0.14 ms of its
 * 1.3 ms (medians, Chromium 156) in zod validating 50 rows. It accepts exactly
 * what the zod schema of the messages table (db/rows.ts) accepts, on any value
 * IndexedDB can hand back (structured clones: plain objects, arrays,
 * primitives); `test/unit/store/message-row.property.test.ts` holds the two
 * side by side on generated and mutated rows. Where it is unsure (another
 * prototype, a key it does not know), it says no, and zod decides and names
 * the bad fields: the error for a bad row is zod's, as before.
 *
 * A change to the row or message schema must change this file too; the
 * property test fails until it does.
 */
import { checkRow, type MessageRow } from './db/rows.js';

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);
const STATUSES = new Set(['complete', 'streaming', 'interrupted']);
const MESSAGE_KEYS = new Set(['role', 'content', 'name', 'tool_calls', 'tool_call_id']);

/** An object literal or a null-prototype object; for any other kind of object (none comes out of IndexedDB) zod decides. */
const isPlain = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
};
const isString = (value: unknown): value is string => typeof value === 'string';
const isNonEmpty = (value: unknown): value is string => typeof value === 'string' && value.length > 0;
const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/** Every key `for…in` sees is one of `allowed` (as zod's strictObject counts unknown keys). */
function onlyKeys(value: Record<string, unknown>, allowed: ReadonlySet<string>): boolean {
  for (const key in value) if (!allowed.has(key)) return false;
  return true;
}

const TEXT_PART = new Set(['type', 'text']);
const IMAGE_PART = new Set(['type', 'image_url']);
const URL_KEYS = new Set(['url']);
const CALL_KEYS = new Set(['id', 'type', 'function']);
const FUNCTION_KEYS = new Set(['name', 'arguments']);

function isContentPart(part: unknown): boolean {
  if (!isPlain(part)) return false;
  if (part.type === 'text') return onlyKeys(part, TEXT_PART) && isString(part.text);
  if (part.type !== 'image_url') return false;
  const image = part.image_url;
  return onlyKeys(part, IMAGE_PART) && isPlain(image) && onlyKeys(image, URL_KEYS) && isNonEmpty(image.url);
}

function isToolCall(call: unknown): boolean {
  if (!isPlain(call) || !onlyKeys(call, CALL_KEYS) || !isNonEmpty(call.id) || call.type !== 'function') return false;
  const fn = call.function;
  return isPlain(fn) && onlyKeys(fn, FUNCTION_KEYS) && isNonEmpty(fn.name) && isString(fn.arguments);
}

function everyItem(value: unknown, check: (item: unknown) => boolean): value is unknown[] {
  if (!Array.isArray(value)) return false;
  for (let i = 0; i < value.length; i++) if (!check(value[i])) return false;
  return true;
}

/** The message schema of core/message.ts: its fields, then the chat API's rules between them. */
function isMessage(message: unknown): boolean {
  if (!isPlain(message) || !onlyKeys(message, MESSAGE_KEYS)) return false;
  const { role, content, name, tool_calls: calls, tool_call_id: callId } = message;
  if (!isString(role) || !ROLES.has(role)) return false;
  if (content !== null && !isString(content) && !everyItem(content, isContentPart)) return false;
  if (name !== undefined && !isNonEmpty(name)) return false;
  if (calls !== undefined && !everyItem(calls, isToolCall)) return false;
  if (callId !== undefined && !isNonEmpty(callId)) return false;
  if ((role === 'tool') !== (callId !== undefined)) return false;
  if (calls !== undefined && role !== 'assistant') return false;
  return content !== null || (role === 'assistant' && calls !== undefined && calls.length > 0);
}

function isTokenCounts(tokens: unknown): boolean {
  if (!isPlain(tokens)) return false;
  for (const key of Reflect.ownKeys(tokens)) if (typeof key !== 'string' || !isNumber(tokens[key])) return false;
  return true;
}

/** True when zod's schema of the messages table accepts `row`; false when it may not (then ask zod). */
export function isValidMessageRow(row: unknown): row is MessageRow {
  if (!isPlain(row)) return false;
  const { status, streaming } = row;
  return (
    isString(row.id) &&
    isString(row.userId) &&
    isString(row.sessionId) &&
    isNonEmpty(row.order) &&
    isNumber(row.createdAt) &&
    isString(status) &&
    STATUSES.has(status) &&
    (streaming === undefined || streaming === 1) &&
    (streaming === 1) === (status === 'streaming') &&
    (row.updateOrder === undefined || isString(row.updateOrder)) &&
    (row.tokens === undefined || isTokenCounts(row.tokens)) &&
    isMessage(row.message)
  );
}

/**
 * Validates a message row read from IndexedDB, as `checkRow('messages', …)` does: returns it when valid,
 * throws `schema/invalid` naming the row's key and the bad fields when not.
 */
export function checkMessageRow(row: unknown): MessageRow {
  if (isValidMessageRow(row)) return row;
  const fields = isPlain(row) ? row : {};
  return checkRow('messages', [fields.userId, fields.sessionId, fields.id], row);
}
