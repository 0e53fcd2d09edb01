/** The session store on IndexedDB (Dexie): the part of the public `tabula-sdk` entry it re-exports (see src/index.ts). */
export { openTabula } from './tabula.js';
export type { AdoptResult, OpenTabulaOptions, StorageEstimate, Tabula } from './tabula.js';
export type { Session, SessionJournal } from './session/index.js';
export type { RunContext, RunOptions } from './runs.js';
export type { MessageStream, StreamInit } from './stream.js';
export type { ChangeOrigin, DroppedWorkInfo, SaveConflictInfo, SessionChange } from './changes.js';
export { SessionExportSchema, parseSessionExport } from './session/export-format.js';
export type { SessionExport } from './session/export-format.js';
export type {
  CheckpointInfo,
  ConflictPolicy,
  Memory,
  MemoryTransaction,
  Note,
  RunInfo,
  SaveOptions,
  SessionInfo,
  SessionOptions,
  SessionState,
  SessionStatePatch,
  StoredMessage,
} from './types.js';
