/**
 * The token counter's argument checks: its options, the messages and texts
 * it counts, and the counts a worker answers. A wrong argument is refused
 * with an `argument/invalid` that names the method and says what it got,
 * before anything is counted or cached; a worker's bad answer is a
 * `schema/invalid`. Counting itself lives in counter.ts.
 */
import { isPlainObject } from '../core/args.js';
import { TabulaError } from '../core/errors.js';
import type { Message } from '../core/message.js';
import { messageTokenText } from '../core/tokens.js';
import type { WorkerPreference } from './backend.js';
import type { CountTextOptions, TokenCounterOptions } from './counter.js';
import { ENCODINGS, type Encoding } from './engine.js';

/** What a wrong argument was, for the error message: its kind, and its value when short. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an object (${Object.prototype.toString.call(value).slice(8, -1)})`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return typeof value;
}

/** The options of `createTokenCounter()` that choose the engine, checked, with their defaults. */
export interface CheckedCounterOptions {
  readonly encoding: Encoding;
  readonly preference: WorkerPreference;
}

/**
 * Checks every field of `createTokenCounter(options)`; throws `argument/invalid` naming the first
 * wrong one. Returns the encoding and the worker preference with their defaults (see TokenCounterOptions).
 */
export function checkCounterOptions(options: TokenCounterOptions): CheckedCounterOptions {
  const given: unknown = options;
  if (!isPlainObject(given)) throw new TabulaError('argument/invalid', `createTokenCounter() takes an options object, got ${describe(given)}.`);
  const encoding = options.encoding === undefined ? 'o200k_base' : options.encoding;
  if (!ENCODINGS.includes(encoding)) {
    throw new TabulaError('argument/invalid', `createTokenCounter: encoding must be one of ${ENCODINGS.join(', ')}, got ${JSON.stringify(encoding)}.`);
  }
  const preference = options.worker === undefined ? 'shared' : options.worker;
  if (!['shared', 'dedicated', 'none'].includes(preference)) {
    throw new TabulaError('argument/invalid', `createTokenCounter: worker must be 'shared', 'dedicated' or 'none', got ${JSON.stringify(preference)}.`);
  }
  for (const field of ['requestTimeoutMs', 'startTimeoutMs', 'cacheSize'] as const) {
    const value = options[field];
    if (value !== undefined && (typeof value !== 'number' || !(value >= 0))) {
      throw new TabulaError('argument/invalid', `createTokenCounter: ${field} must be a number ≥ 0, got ${describe(value)}.`);
    }
  }
  const { workerUrl } = options;
  if (workerUrl !== undefined && typeof workerUrl !== 'string' && !(workerUrl instanceof URL)) {
    throw new TabulaError('argument/invalid', `createTokenCounter: workerUrl must be a string or a URL, got ${describe(workerUrl)}.`);
  }
  return { encoding, preference };
}

/** The token text of each message; refuses anything that is not an array of messages. */
export function tokenTexts(messages: unknown, method: string): string[] {
  if (!Array.isArray(messages)) throw new TabulaError('argument/invalid', `counter.${method}() takes an array of messages, got ${describe(messages)}.`);
  return messages.map((message: unknown, i) => {
    const m = message as Partial<Message> | null;
    const content: unknown = m?.content;
    const fine =
      isPlainObject(m) &&
      typeof m.role === 'string' &&
      (typeof content === 'string' || content === null || (Array.isArray(content) && content.every((part: unknown) => isPlainObject(part) && typeof part.type === 'string'))) &&
      (m.name === undefined || typeof m.name === 'string') &&
      (m.tool_call_id === undefined || typeof m.tool_call_id === 'string') &&
      (m.tool_calls === undefined ||
        (Array.isArray(m.tool_calls) && m.tool_calls.every((call: unknown) => isPlainObject(call) && isPlainObject(call.function) && typeof call.function.name === 'string' && typeof call.function.arguments === 'string')));
    if (!fine) {
      throw new TabulaError('argument/invalid', `counter.${method}(): messages[${i}] is not a message (a { role, content } object with string or part-array content), got ${describe(message)}.`);
    }
    return messageTokenText(m as Message);
  });
}

/** A worker's count of one text, checked at the boundary: a worker (or a stale cached script) may answer anything. */
export function checkedCount(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    // Numbers as they are (JSON shows NaN as "null"); JSON.stringify(undefined) is undefined, shown as "undefined".
    const shown = typeof value === 'number' ? String(value) : JSON.stringify(value);
    throw new TabulaError('schema/invalid', `The token worker answered ${shown} for a text; expected a whole number ≥ 0.`);
  }
  return value;
}

/** The options of countText()/measureText(): `undefined` is `{}`; anything but `{ onProgress?, signal? }` is refused. */
export function checkCountOptions(options: unknown, method: string): CountTextOptions {
  if (options === undefined) return {};
  if (!isPlainObject(options)) throw new TabulaError('argument/invalid', `counter.${method}() options must be an object { onProgress?, signal? }, got ${describe(options)}.`);
  const { onProgress, signal } = options;
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new TabulaError('argument/invalid', `counter.${method}({ onProgress }) must be a function, got ${describe(onProgress)}.`);
  if (signal !== undefined && !(typeof AbortSignal === 'function' && signal instanceof AbortSignal)) {
    throw new TabulaError('argument/invalid', `counter.${method}({ signal }) must be an AbortSignal, got ${describe(signal)}.`);
  }
  return options;
}
