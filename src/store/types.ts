/**
 * The public types of the session store: stored messages, state, notes,
 * memory, runs and checkpoints as the Session API returns them. The Session
 * interface itself is in session.ts, the export format in export.ts.
 */
import type { z } from 'zod';
import type { JsonValue } from '../core/json.js';
import type { Message } from '../core/message.js';
import type { MessageStatus, StateFields } from '../core/ops.js';

/** A message as stored: the wire message plus its identity, order and status. */
export interface StoredMessage extends Message {
  /** Unique within the session, stable across tabs and devices. */
  readonly id: string;
  /** HLC order key; messages sort by it. */
  readonly order: string;
  /** 'streaming' while a stream writes it; 'interrupted' when its stream ended unfinished. */
  readonly status: MessageStatus;
  /** ms since the epoch. */
  readonly createdAt: number;
}

/** The versioned state fields of a session. */
export interface SessionState extends StateFields {
  /** +1 on every successful save. */
  readonly version: number;
  /** ms since the epoch of the last change to the session. */
  readonly updatedAt: number;
}

/** The fields `save()` may write. */
export type SessionStatePatch = Partial<Omit<SessionState, 'version' | 'updatedAt'>>;

/** What to do when `save({ expectedVersion })` finds another version. */
export type ConflictPolicy =
  | 'reject'
  | 'overwrite'
  /**
   * A merge: gets the session as it is now and the caller's patch, returns
   * (or resolves to) the patch to save instead. Its result is validated like
   * a patch and saved compare-and-set; if the session changed again
   * meanwhile, the function runs again (at most 8 times).
   */
  | ((current: SessionState, patch: SessionStatePatch) => SessionStatePatch | Promise<SessionStatePatch>);

/** How `session.save()` treats a session that another write changed since it was read. */
export interface SaveOptions {
  /** Compare-and-set: the version the caller read. Omit for last-write-wins. */
  expectedVersion?: number;
  /** @default 'reject' */
  onConflict?: ConflictPolicy;
}

/** A line of progress. */
export interface Note {
  /** Unique within the session. */
  readonly id: string;
  /** The note, at most 500 characters. */
  readonly text: string;
  /** The run that wrote it (`ctx.note()`), or null for `session.note()`. */
  readonly runId: string | null;
  /** That run's scope, or null for `session.note()`. */
  readonly scope: string | null;
  /** ms since the epoch. */
  readonly at: number;
}

/** A small key-value store per (session, scope), saved at once. */
export interface Memory {
  /** The value under `key`, or undefined when none is stored. */
  get<T extends JsonValue>(key: string): Promise<T | undefined>;
  /** null or undefined throws 'memory/bad-value'; delete() removes a key. */
  set(key: string, value: JsonValue): Promise<void>;
  /** Removes `key`, in every tab and (with sync) on every device; absent keys are fine. */
  delete(key: string): Promise<void>;
  /** The stored keys of this scope, sorted. */
  keys(): Promise<string[]>;
  /** Removes every key of this scope, in one write. */
  clear(): Promise<void>;
  /**
   * Reads and writes several keys of this scope in one IndexedDB
   * transaction: every write lands or none does, and no other write to the
   * session (from this tab or another) interleaves. Use it for
   * compare-and-set and multi-key updates. `fn` may await only the calls of
   * its `tx` (an IndexedDB transaction ends when it waits on anything else),
   * so prepare values before calling. When `fn` throws, nothing is written
   * and the error is rethrown.
   */
  transact<T>(fn: (tx: MemoryTransaction) => Promise<T>): Promise<T>;
}

/** The reads and writes available inside `memory.transact()`. Same key and value rules as {@link Memory}. */
export interface MemoryTransaction {
  /** The value under `key` as of this point of the transaction (its own writes included). */
  get<T extends JsonValue>(key: string): Promise<T | undefined>;
  /** Sets `key`; lands when the transaction does. */
  set(key: string, value: JsonValue): Promise<void>;
  /** Removes `key`; lands when the transaction does. */
  delete(key: string): Promise<void>;
  /** Live keys of the scope, sorted, as of this point of the transaction. */
  keys(): Promise<string[]>;
  /** Live keys and their values, sorted by key, in one read; `prefix` keeps only keys that start with it. */
  entries(prefix?: string): Promise<[string, JsonValue][]>;
  /**
   * Appends messages to the session in this transaction (as `session.append()` does, so a memory
   * write and the messages it stands for land together). Returns them as stored, with their ids.
   */
  appendMessages(messages: readonly Message[]): Promise<StoredMessage[]>;
  /**
   * Removes the session's messages with these ids in this transaction, for good: a replayed or late
   * append of a removed id (from another tab, or sync) does not bring it back. Unknown ids are ignored.
   */
  removeMessages(ids: readonly string[]): Promise<void>;
}

/** A row of `tabula.sessions()`. */
export interface SessionInfo {
  /** The session's user. */
  readonly userId: string;
  /** The session's id. */
  readonly sessionId: string;
  /** The state's version (`SessionState.version`). */
  readonly version: number;
  /** How many messages the session holds. */
  readonly messageCount: number;
  /** The state's `summary` field. */
  readonly summary: string | null;
  /** ms since the epoch. */
  readonly createdAt: number;
  /** ms since the epoch of the last change. */
  readonly updatedAt: number;
  /** The session this one was forked from, or null. */
  readonly forkOf: { readonly userId: string; readonly sessionId: string } | null;
}

/** A checkpoint's handle. */
export interface CheckpointInfo {
  /** Names the checkpoint for `session.restore()`. */
  readonly id: string;
  /** The label given to `session.checkpoint()`, or null. */
  readonly label: string | null;
  /** ms since the epoch. */
  readonly at: number;
}

/** Options of `tabula.session()`. */
export interface SessionOptions {
  /** @default the Tabula's userId */
  userId?: string;
  /** Validates `state.context` on save (and in runs). */
  contextSchema?: z.ZodObject;
}

/** A run as recorded in the runs table. */
export interface RunInfo {
  /** The run's id (`RunContext.runId`). */
  readonly runId: string;
  /** The run's scope. */
  readonly scope: string;
  /** Its visit number in the scope (`RunContext.visit`). */
  readonly visit: number;
  /** Its attempt number under this runId (`RunContext.attempt`). */
  readonly attempt: number;
  /** 'abandoned': left running by a tab that closed or crashed. */
  readonly status: 'running' | 'succeeded' | 'failed' | 'interrupted' | 'abandoned';
  /** ms since the epoch. */
  readonly startedAt: number;
  /** ms since the epoch when it ended (or was found abandoned); null while running. */
  readonly endedAt: number | null;
}
