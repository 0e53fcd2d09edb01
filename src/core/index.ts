/**
 * `tabula-sdk/core`: the pure part of Tabula. No DOM, no IndexedDB, no workers;
 * it runs in any JavaScript runtime and has zod as its only dependency.
 *
 * A curated entry: it exports what the README documents (its API table and
 * tour) and the types those exports' signatures name, nothing else. Helpers
 * the other modules share stay in their source files, and tests import them
 * from there; test/unit/exports.test.ts pins the list, so widening it is a
 * deliberate change.
 */
export { TabulaError, isTabulaError } from './errors.js';
export type { ErrorCode, TabulaErrorOptions } from './errors.js';
export { JsonValueSchema, deepFreeze, stableKey, structuralEqual } from './json.js';
export type { JsonObject, JsonValue } from './json.js';
export { MessageSchema, messageText, parseMessage } from './message.js';
export type { ContentPart, Message, Role, ToolCall } from './message.js';
export { PrefixContext } from './prefix.js';
export type { PrefixInit } from './prefix.js';
export { MutationJournal } from './journal.js';
export { allOf, anyOf, applyScope, lastTurns, not, since, tagged } from './scopes.js';
export type { ContextScope } from './scopes.js';
export { ApproxTokenCounter, estimateMessageTokens, messageTokenText } from './tokens.js';
export type { TokenCounter, TokenMeasure } from './tokens.js';
export { WorkingContext } from './context.js';
export { fromFrozenData, toFrozenData } from './frozen-data.js';
export type { FrozenContextData } from './frozen-data.js';
export type { ContextDiff, FrozenContext, WorkingContextInit } from './context.js';
export { compareHlc, createHlc } from './hlc.js';
export type { HlcOptions, HlcTimestamp, HybridLogicalClock } from './hlc.js';
export { OpSchema, PrefixDataSchema, StateFieldsSchema, makeOp, parseOp } from './ops.js';
export type { CheckpointSnapshot, MessageStatus, Op, OpBody, OpKind, PrefixData, StateFields, StatePatch } from './ops.js';
