/**
 * A Session handle: one conversation, keyed by (userId, sessionId), on
 * IndexedDB. Every write is one transaction through the op write path and
 * is durable when its promise resolves; every read validates the rows it
 * returns. The handle holds no copy of the data: two handles, in one tab or
 * in several, always see the same session.
 *
 * The handle composes its state (state.ts), journal (journal.ts) and copies
 * (copy.ts) in this folder, and runs (runs.ts), streaming (stream.ts) and the
 * blackboard (src/blackboard); their logic lives in those modules.
 */
import type { z } from 'zod';
import type { Blackboard } from '../../blackboard/blackboard.js';
import type { BoardLease } from '../../blackboard/registry.js';
import { WorkingContext, type FrozenContext } from '../../core/context.js';
import { TabulaError } from '../../core/errors.js';
import type { Message } from '../../core/message.js';
import { MutationJournal } from '../../core/journal.js';
import { checkOptions, describeValue } from '../../core/args.js';
import type { PrefixData } from '../../core/ops.js';
import { PrefixContext } from '../../core/prefix.js';
import type { ContextScope } from '../../core/scopes.js';
import type { SessionChange } from '../changes.js';
import { assertOpen, type StoreContext } from '../context.js';
import { checkRow, type SessionRow } from '../db/rows.js';
import { mapStorageError } from '../errors.js';
import { createMemory } from '../memory.js';
import { addNote } from '../notes.js';
import { createRunner, type RunContext, type RunOptions } from '../runs.js';
import { countSessionTokens } from '../session-tokens.js';
import { toWireMessage } from '../stored.js';
import { openStream, type MessageStream, type StreamInit } from '../stream.js';
import type { CheckpointInfo, RunInfo, Memory, Note, SaveOptions, SessionState, SessionStatePatch, StoredMessage } from '../types.js';
import { commit, sessionNotFound, type Emitter, type WriteScope } from '../writer.js';
import { createCheckpoint, exportSession, forkSession, listCheckpoints, restoreCheckpoint } from './copy.js';
import type { SessionExport } from './export-format.js';
import { createJournal, readJournal, type SessionJournal } from './journal.js';
import { createMessages } from './messages.js';
import { noteRows, type HandleScope } from './scope.js';
import { saveState, toState } from './state.js';

export { importInto } from './copy.js';
export type { SessionJournal } from './journal.js';

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

function toPrefixData(prefix: PrefixContext): PrefixData {
  if (!(prefix instanceof PrefixContext)) {
    throw new TabulaError('argument/invalid', 'setPrefix() takes a PrefixContext; build one with new PrefixContext({ systemPrompt, grounding }).');
  }
  return { systemPrompt: prefix.systemPrompt, grounding: [...prefix.grounding], schemaBlock: prefix.schemaBlock };
}

export interface SessionHandleInit {
  store: StoreContext;
  userId: string;
  sessionId: string;
  contextSchema: z.ZodObject | undefined;
  importSession: SessionImporter;
  /** Called when the handle first uses its blackboard (the handle tracker keeps the handle alive while the board is). */
  onBoard?: (blackboard: object, session: Session) => void;
  /** The transaction `session()` read in (see open-read.ts): the handle's first read of messages is made in it while it is alive. */
  openTx?: IDBTransaction | null;
  /**
   * The session life the handle was opened on (`lifeOf` its row). Every write through the handle is
   * bound to it: once the session is deleted, even if created again, the handle's writes throw
   * `session/not-found` instead of landing in the new life. Absent: bound to no life (writes go to
   * whatever session has the id).
   */
  life?: string;
}

/**
 * Builds the handle of an existing session, and the function that releases what it holds (its lease on
 * the blackboard, its subscriptions). `release` does not reference the handle, so it can run after the
 * handle was garbage-collected (see handles.ts).
 */
export function createSessionHandle(init: SessionHandleInit): { session: Session; release: () => Promise<void> } {
  const { store, userId, sessionId, contextSchema, life } = init;
  const { db } = store;
  const label = `session "${sessionId}" of user "${userId}"`;
  const unsubscribers = new Set<() => void>();
  // The blackboard (a Yjs doc, its IndexedDB database and its cross-tab channel) opens on first use:
  // a session whose board is never touched costs none of them.
  const slot: BoardSlot = { lease: null };
  const release = releaser(slot, unsubscribers);
  const lease = (): BoardLease => {
    if (!slot.lease) {
      // Of the handle's life only: a handle whose session was deleted (and perhaps created again) gets a
      // board that refuses writes with session/not-found, not the new life's.
      slot.lease = store.boards.acquire(userId, sessionId, life);
      // Touched after close(): hand back a board that refuses use, holding nothing open.
      if (closed) void slot.lease.release();
      else init.onBoard?.(slot.lease.blackboard, session);
    }
    return slot.lease;
  };
  const board = (): Blackboard => lease().blackboard;
  let closed = false;

  const ensureOpen = () => {
    assertOpen(store);
    if (closed) throw new TabulaError('storage/closed', `This handle of ${label} is closed; get a new one with tabula.session().`);
  };

  const write = <T>(what: string, build: (tx: Emitter) => Promise<T>, scope?: WriteScope): Promise<T> => {
    ensureOpen();
    return commit(
      store,
      userId,
      sessionId,
      `${what} (${label})`,
      (tx) => {
        tx.existing(life);
        return build(tx);
      },
      scope,
    );
  };

  const read = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    ensureOpen();
    try {
      return await fn();
    } catch (error) {
      throw mapStorageError(error, `${what} (${label})`);
    }
  };

  const readRow = async (): Promise<SessionRow> => {
    const key: [string, string] = [userId, sessionId];
    const row = await read('read the session', () => db.sessions.get(key));
    if (!row) throw sessionNotFound(userId, sessionId);
    return checkRow('sessions', key, row);
  };

  const scope: HandleScope = { store, userId, sessionId, label, contextSchema, life, ensureOpen, write, read, readRow };

  const messages = createMessages(scope, init);
  const runner = createRunner({ store, userId, sessionId, label, contextSchema, ...(life === undefined ? {} : { life }), append: messages.append });

  const session: Session = {
    userId,
    sessionId,
    get blackboard() {
      return lease().blackboard;
    },

    append: (input) => messages.append(input),

    messages: messages.list,

    async messageCount() {
      return (await readRow()).messageCount;
    },

    async prefix() {
      return new PrefixContext((await readRow()).prefix);
    },

    async setPrefix(prefix) {
      const data = toPrefixData(prefix);
      await write('set the prefix', async (tx) => {
        tx.existing();
        await tx.emit('prefix.set', { prefix: data });
      });
    },

    journal: createJournal(scope),

    async state() {
      return toState(await readRow());
    },

    save: (patch, options) => saveState(scope, patch, options),

    async clearContext() {
      await write('clear the context', async (tx) => {
        tx.existing();
        await tx.emit('session.clear', {});
      });
    },

    async note(text) {
      ensureOpen();
      await addNote(store, { userId, sessionId, label, ...(life === undefined ? {} : { life }) }, text, { runId: null, scope: null });
    },

    async notes() {
      const rows = await read('read notes', () => noteRows(scope).toArray());
      return rows.map((row) => checkRow('notes', row.id, row)).map(({ id, text, runId, scope, at }) => Object.freeze({ id, text, runId, scope, at }));
    },

    memory(memoryScope = 'default') {
      ensureOpen();
      return createMemory(store, userId, sessionId, memoryScope, life);
    },

    run(fn, options) {
      ensureOpen();
      return runner.run(fn, options);
    },

    interrupt(reason) {
      ensureOpen();
      return runner.interrupt(reason);
    },

    runs() {
      ensureOpen();
      return read('list runs', () => runner.runs());
    },

    stream(streamInit) {
      ensureOpen();
      return openStream({ store, userId, sessionId, label, ...(life === undefined ? {} : { life }) }, streamInit);
    },

    async tokens() {
      ensureOpen();
      return countSessionTokens({ store, userId, sessionId, label, readRow });
    },

    async toContext(options) {
      options = checkOptions(options, 'toContext(options)');
      const [row, list, entries] = await Promise.all([readRow(), session.messages(options), readJournal(scope), lease().blackboard.whenLoaded]);
      const journal = new MutationJournal<unknown>(entries.slice(0, row.journalWatermark));
      journal.apply(entries.slice(row.journalWatermark));
      return new WorkingContext({
        prefix: new PrefixContext(row.prefix),
        messages: list.map(toWireMessage),
        // The blackboard is the scratchpad axis; write a context's changes back with blackboard.update().
        scratchpad: lease().blackboard.toJSON(),
        journal,
        tokenCounter: store.tokenCounter,
      });
    },

    async freeze() {
      return (await session.toContext()).freeze();
    },

    fork: (newSessionId, options) => forkSession(scope, { board, importSession: init.importSession }, newSessionId, options),

    checkpoint: (checkpointLabel) => createCheckpoint(scope, checkpointLabel),

    checkpoints: () => listCheckpoints(scope),

    restore: (checkpointId) => restoreCheckpoint(scope, checkpointId),

    export: () => exportSession(scope, board),

    subscribe(listener) {
      if (typeof listener !== 'function') throw new TabulaError('argument/invalid', `subscribe(listener) takes a function, got ${describeValue(listener)}.`);
      ensureOpen();
      const unsubscribe = store.feed.subscribe(userId, sessionId, listener);
      unsubscribers.add(unsubscribe);
      return () => {
        unsubscribe();
        unsubscribers.delete(unsubscribe);
      };
    },

    async close() {
      if (closed) return;
      closed = true;
      await release();
    },
  };
  return { session, release };
}

/**
 * Built outside createSessionHandle on purpose: a closure made there would share its scope, which holds
 * the handle, and keep it alive.
 */
function releaser(slot: BoardSlot, unsubscribers: Set<() => void>): () => Promise<void> {
  return async () => {
    for (const unsubscribe of unsubscribers) unsubscribe();
    unsubscribers.clear();
    await slot.lease?.release();
  };
}

/** Where a handle keeps its blackboard lease once the board is first used; it never references the handle. */
interface BoardSlot {
  lease: BoardLease | null;
}
