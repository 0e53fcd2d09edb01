/**
 * The `Session` interface: what a session handle offers, one doc line per member. The handle that
 * implements it is index.ts.
 */
import type { z } from 'zod';
import type { Blackboard } from '../../blackboard/blackboard.js';
import type { FrozenContext, WorkingContext } from '../../core/context.js';
import type { Message } from '../../core/message.js';
import type { PrefixContext } from '../../core/prefix.js';
import type { ContextScope } from '../../core/scopes.js';
import type { SessionChange } from '../changes.js';
import type { RunContext, RunOptions } from '../runs.js';
import type { MessageStream, StreamInit } from '../stream.js';
import type { CheckpointInfo, RunInfo, Memory, Note, SaveOptions, SessionState, SessionStatePatch, StoredMessage } from '../types.js';
import type { SessionExport } from './export-format.js';
import type { SessionJournal } from './journal.js';

/**
 * One conversation and everything kept with it. A handle belongs to the life of the session it was
 * opened on: once the session is deleted (here, in another tab, or by sync), its writes throw
 * `session/not-found`, even after the session is created again under the same id; open it again with
 * `tabula.session()` to write to the new one.
 */
export interface Session {
  /** The user the session belongs to: the Tabula's `userId`, unless `tabula.session()` named another. */
  readonly userId: string;
  /** The session's id within its user (1–256 characters), as given to `tabula.session()`. */
  readonly sessionId: string;
  /** Appends messages; durable when the promise resolves. */
  append(message: Message | Message[]): Promise<StoredMessage[]>;
  /** Messages oldest first; `scope` is resolved over the whole session, then `last` keeps the newest. */
  messages(options?: { last?: number; scope?: ContextScope }): Promise<StoredMessage[]>;
  /** How many messages the session holds (read from its row, not counted); throws `session/not-found` when the session is gone. */
  messageCount(): Promise<number>;
  /** The stored prefix (system prompt, grounding, schema block) as a new PrefixContext. */
  prefix(): Promise<PrefixContext>;
  /** Replaces the prefix; durable when the promise resolves. Anything but a PrefixContext throws `argument/invalid`. */
  setPrefix(prefix: PrefixContext): Promise<void>;
  /** The persisted MutationJournal: its entries and watermark live in IndexedDB, so they survive reloads and every tab sees them. */
  readonly journal: SessionJournal;
  /** The session's shared scratchpad: a Yjs document, live in every tab, stored in IndexedDB. */
  readonly blackboard: Blackboard;
  /** The state fields with their `version` and `updatedAt` (ms since the epoch), as a frozen copy. */
  state(): Promise<SessionState>;
  /**
   * Writes the fields `patch` names, bumps `version` and resolves to the new state. With `expectedVersion`
   * it is a compare-and-set: a stale save writes nothing and throws `session/conflict`, unless `onConflict`
   * overwrites or merges. A field that is not JSON, or one `save()` does not write, throws `schema/invalid`.
   */
  save(patch: SessionStatePatch, options?: SaveOptions): Promise<SessionState>;
  /** Drops messages and summary; keeps prefix, tasks, plan, permissions, tools, journal, memory, notes. */
  clearContext(): Promise<void>;
  /** ≤ 500 characters; '' does nothing; longer throws 'note/too-long'. */
  note(text: string): Promise<void>;
  /** The session's notes, oldest first: those of `note()` and of runs' `ctx.note()`. */
  notes(): Promise<Note[]>;
  /**
   * The key-value memory of `scope` (`'default'` when omitted; 1–128 characters, a bad one throws
   * `argument/invalid`), each write saved at once. Reads nothing until its methods are called.
   */
  memory(scope?: string): Memory;
  /** Runs fn as one agent turn under the session's lock (see runs.ts). */
  run<T>(fn: (ctx: RunContext) => Promise<T>, options?: RunOptions): Promise<T>;
  /** Aborts the run in flight on this session, in any tab; false when idle. */
  interrupt(reason?: string): Promise<boolean>;
  /** The session's runs, oldest first. */
  runs(): Promise<RunInfo[]>;
  /** Starts a durably streamed assistant message. */
  stream(init: StreamInit): Promise<MessageStream>;
  /** Prefix + messages through the Tabula's counter, cached per message. */
  tokens(): Promise<number>;
  /**
   * The session as a WorkingContext for the pure core: the prefix, the messages (`scope` and `last` as
   * in `messages()`), the blackboard as its scratchpad, the journal and the Tabula's token counter. A
   * copy: changes to it are not saved (write a scratchpad back with `blackboard.update()`).
   */
  toContext(options?: { last?: number; scope?: ContextScope }): Promise<WorkingContext>;
  /** The whole session's `toContext()`, frozen: an immutable snapshot to hand to the core. */
  freeze(): Promise<FrozenContext>;
  /** A persisted, independent copy under a new id: messages, prefix, state, journal, memory and blackboard. */
  fork(sessionId: string, options?: { userId?: string }): Promise<Session>;
  /**
   * Keeps the messages, prefix and state fields as they are now, for `restore()`; notes, memory, the
   * journal and the blackboard are not kept. `label` is any string; anything else throws `argument/invalid`.
   */
  checkpoint(label?: string): Promise<CheckpointInfo>;
  /** The session's checkpoints, oldest first. */
  checkpoints(): Promise<CheckpointInfo[]>;
  /** Puts messages, prefix and state fields back as they were at the checkpoint (a new version). */
  restore(checkpointId: string): Promise<void>;
  /**
   * The session as versioned JSON (`format: 'tabula.session'`): messages, prefix, state, journal, notes,
   * memory and blackboard, without checkpoints and runs. `tabula.importSession()` takes it back.
   */
  export(): Promise<SessionExport>;
  /** Fires after each committed change to this session, made in this tab, another tab, or by sync. */
  subscribe(listener: (change: SessionChange) => void): () => void;
  /**
   * Releases this handle at once (its blackboard and its subscriptions); its calls then throw
   * `storage/closed`. The session and its other handles are untouched; a second close does nothing.
   */
  close(): Promise<void>;
}

/** Imports an export under `userId` (used by fork). */
export type SessionImporter = (data: SessionExport, options: { userId: string; contextSchema?: z.ZodObject | undefined }) => Promise<Session>;
