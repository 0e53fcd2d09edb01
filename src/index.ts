/**
 * `tabula-sdk`: the browser entry. It re-exports the pure core
 * (`tabula-sdk/core`) and adds the IndexedDB store, the blackboard and the
 * worker token counter. Importing it opens nothing: every resource is
 * opened by a factory.
 *
 * A curated entry: each name is listed, and only what the README documents
 * (with the types its signatures name) is here; test/unit/exports.test.ts
 * pins the list. The folders' own index files are internal and may export more.
 */
export * from './core/index.js';
export { openTabula, SessionExportSchema, parseSessionExport } from './store/index.js';
export type {
  AdoptResult,
  ChangeOrigin,
  CheckpointInfo,
  ConflictPolicy,
  DroppedWorkInfo,
  Memory,
  MemoryTransaction,
  MessageStream,
  Note,
  OpenTabulaOptions,
  RunContext,
  RunInfo,
  RunOptions,
  SaveConflictInfo,
  SaveOptions,
  Session,
  SessionChange,
  SessionExport,
  SessionInfo,
  SessionJournal,
  SessionOptions,
  SessionState,
  SessionStatePatch,
  StorageEstimate,
  StoredMessage,
  StreamInit,
  Tabula,
} from './store/index.js';
export { createBlackboard } from './blackboard/index.js';
export type { Blackboard, BlackboardChange, BlackboardInit, ChangeSource } from './blackboard/index.js';
export { createTokenCounter } from './tokens/index.js';
export type { CountTextOptions, CounterMode, Encoding, TokenCounterOptions, WorkerTokenCounter } from './tokens/index.js';
