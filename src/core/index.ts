/**
 * `tabula-sdk/core`: the pure part of Tabula. No DOM, no IndexedDB, no workers;
 * it runs in any JavaScript runtime and has zod as its only dependency.
 */
export { TabulaError, isTabulaError, assertNever, describeIssues, formatPath } from './errors.js';
export type { ErrorCode, TabulaErrorOptions, ValidationIssue } from './errors.js';
export {
  JsonValueSchema,
  assertJsonValue,
  cloneJson,
  deepFreeze,
  findJsonProblem,
  findKeyProblem,
  assertSafeKey,
  MAX_JSON_DEPTH,
  isJsonValue,
  stableKey,
  structuralEqual,
} from './json.js';
export type { DeepReadonly, JsonObject, JsonValue } from './json.js';
export { shortHash } from './hash.js';
export { ID_MAX_LENGTH, KEY_MAX_LENGTH, checkName, findNameProblem, nameSchema } from './names.js';
export { MessageSchema, messageText, parseMessage, parseMessages } from './message.js';
export type { ContentPart, Message, Role, ToolCall } from './message.js';
export { PrefixContext } from './prefix.js';
export type { PrefixInit } from './prefix.js';
export { MutationJournal } from './journal.js';
export { allOf, anyOf, applyScope, lastTurns, not, scopeIndices, since, tagged } from './scopes.js';
export type { ContextScope } from './scopes.js';
export {
  ApproxTokenCounter,
  IMAGE_PART_TOKENS,
  MESSAGE_OVERHEAD_TOKENS,
  estimateMessageTokens,
  estimateTextTokens,
  messageFixedTokens,
  messageTokenText,
} from './tokens.js';
export type { TokenCounter, TokenMeasure } from './tokens.js';
export { WorkingContext } from './context.js';
export { fromFrozenData, toFrozenData } from './frozen-data.js';
export type { FrozenContextData } from './frozen-data.js';
export type { ContextDiff, FrozenContext, WorkingContextInit } from './context.js';
export { ORDER_KEY, compareHlc, createHlc, formatHlc, hlcOf, parseHlc, subOrder } from './hlc.js';
export type { HlcOptions, HlcTimestamp, HybridLogicalClock } from './hlc.js';
export {
  CheckpointSnapshotSchema,
  MessageStatusSchema,
  OpSchema,
  OrderKeySchema,
  PrefixDataSchema,
  StateFieldsSchema,
  StatePatchSchema,
  emptyStateFields,
  makeOp,
  parseOp,
} from './ops.js';
export type { CheckpointSnapshot, MessageStatus, Op, OpBody, OpKind, PrefixData, StateFields, StatePatch } from './ops.js';
