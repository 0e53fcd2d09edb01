/**
 * A Session handle: one conversation, keyed by (userId, sessionId), on
 * IndexedDB. Every write is one transaction through the op write path and
 * is durable when its promise resolves; every read validates the rows it
 * returns. The handle holds no copy of the data: two handles, in one tab or
 * in several, always see the same session.
 *
 * The handle composes runs (runs.ts), streaming (stream.ts) and the
 * blackboard (src/blackboard); their logic lives in those modules.
 */
import type { z } from 'zod';
import type { Blackboard } from '../blackboard/blackboard.js';
import type { BoardLease } from '../blackboard/registry.js';
import { WorkingContext, type FrozenContext } from '../core/context.js';
import { TabulaError, describeIssues, formatPath } from '../core/errors.js';
import { subOrder } from '../core/hlc.js';
import { shortHash } from '../core/hash.js';
import { MutationJournal } from '../core/journal.js';
import { deepFreeze, findJsonProblem, type JsonValue } from '../core/json.js';
import { parseMessage, type Message } from '../core/message.js';
import { checkName } from '../core/names.js';
import { checkOptions, describeValue, isPlainObject } from '../core/args.js';
import { StatePatchSchema, type MessageStatus, type PrefixData } from '../core/ops.js';
import { PrefixContext } from '../core/prefix.js';
import { safeParse } from '../core/validation.js';
import { applyScope, requireScope, type ContextScope } from '../core/scopes.js';
import type { SessionChange } from './changes.js';
import { mapStorageError } from './errors.js';
import type { SessionExport } from './export.js';
import { newId } from './ids.js';
import { createMemory } from './memory.js';
import { addNote } from './notes.js';
import { createRunner, type RunContext, type RunOptions } from './runs.js';
import { openStream, type MessageStream, type StreamInit } from './stream.js';
import { checkRow, sessionRange, type SessionRow } from './schema.js';
import { IMPORTED } from './apply/index.js';
import { checkMessageRow } from './message-row.js';
import { readMessageRows } from './open-read.js';
import { toStoredMessage, toWireMessage } from './stored.js';
import { checkContextSchema } from './context-schema.js';
import { countSessionTokens } from './session-tokens.js';
import type {
  CheckpointInfo,
  RunInfo,
  ConflictPolicy,
  Memory,
  Note,
  SaveOptions,
  SessionState,
  SessionStatePatch,
  StoredMessage,
} from './types.js';
import { assertOpen, commit, sessionNotFound, type Emitter, type StoreContext, type WriteScope } from './writer.js';

/** The persisted journal of a session: a MutationJournal whose entries and watermark survive reloads. */
export interface SessionJournal {
  record(entry: JsonValue): Promise<void>;
  apply(entries: JsonValue[]): Promise<void>;
  diff(): Promise<JsonValue[]>;
  markCommitted(): Promise<void>;
  view(): Promise<JsonValue[]>;
}

/**
 * One conversation and everything kept with it. A handle belongs to the life of the session it was
 * opened on: once the session is deleted (here, in another tab, or by sync), its writes throw
 * `session/not-found`, even after the session is created again under the same id; open it again with
 * `tabula.session()` to write to the new one.
 */
export interface Session {
  readonly userId: string;
  readonly sessionId: string;
  /** Appends messages; durable when the promise resolves. */
  append(message: Message | Message[]): Promise<StoredMessage[]>;
  /** Messages oldest first; `scope` is resolved over the whole session, then `last` keeps the newest. */
  messages(options?: { last?: number; scope?: ContextScope }): Promise<StoredMessage[]>;
  messageCount(): Promise<number>;
  prefix(): Promise<PrefixContext>;
  setPrefix(prefix: PrefixContext): Promise<void>;
  readonly journal: SessionJournal;
  /** The session's shared scratchpad: a Yjs document, live in every tab, stored in IndexedDB. */
  readonly blackboard: Blackboard;
  state(): Promise<SessionState>;
  save(patch: SessionStatePatch, options?: SaveOptions): Promise<SessionState>;
  /** Drops messages and summary; keeps prefix, tasks, plan, permissions, tools, journal, memory, notes. */
  clearContext(): Promise<void>;
  /** ≤ 500 characters; '' does nothing; longer throws 'note/too-long'. */
  note(text: string): Promise<void>;
  notes(): Promise<Note[]>;
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
  toContext(options?: { last?: number; scope?: ContextScope }): Promise<WorkingContext>;
  freeze(): Promise<FrozenContext>;
  /** A persisted, independent copy under a new id: messages, prefix, state, journal, memory and blackboard. */
  fork(sessionId: string, options?: { userId?: string }): Promise<Session>;
  checkpoint(label?: string): Promise<CheckpointInfo>;
  checkpoints(): Promise<CheckpointInfo[]>;
  /** Puts messages, prefix and state fields back as they were at the checkpoint (a new version). */
  restore(checkpointId: string): Promise<void>;
  export(): Promise<SessionExport>;
  /** Fires after each committed change to this session, made in this tab, another tab, or by sync. */
  subscribe(listener: (change: SessionChange) => void): () => void;
  close(): Promise<void>;
}

/** Imports an export under `userId` (used by fork). */
export type SessionImporter = (data: SessionExport, options: { userId: string; contextSchema?: z.ZodObject | undefined }) => Promise<Session>;

const STATE_KEYS = ['summary', 'tasks', 'plan', 'permissions', 'tools', 'context'] as const;

function toPrefixData(prefix: PrefixContext): PrefixData {
  if (!(prefix instanceof PrefixContext)) {
    throw new TabulaError('argument/invalid', 'setPrefix() takes a PrefixContext; build one with new PrefixContext({ systemPrompt, grounding }).');
  }
  return { systemPrompt: prefix.systemPrompt, grounding: [...prefix.grounding], schemaBlock: prefix.schemaBlock };
}

/**
 * The status of a message in a copy (export, fork, checkpoint). A message still streaming is copied as
 * `interrupted` with its text so far: the stream writes to the original only, so in the copy it would
 * stay `streaming` forever.
 */
function copiedStatus(status: MessageStatus): MessageStatus {
  return status === 'streaming' ? 'interrupted' : status;
}

/** How often save() runs a merge function before it gives up on a session that keeps changing under it. */
const MAX_MERGE_ATTEMPTS = 8;

/** Validates save() options up front, so a bad policy is refused whether or not a conflict happens. */
function checkSaveOptions(options: unknown): { expectedVersion: number | undefined; onConflict: ConflictPolicy } {
  if (!isPlainObject(options)) throw new TabulaError('argument/invalid', `save(patch, options) takes an options object or nothing, got ${describeValue(options)}.`);
  const { expectedVersion, onConflict = 'reject' } = options as SaveOptions;
  if (expectedVersion !== undefined && (typeof expectedVersion !== 'number' || !Number.isSafeInteger(expectedVersion) || expectedVersion < 0)) {
    throw new TabulaError('argument/invalid', `save({ expectedVersion }) takes the version number read from state(), got ${describeValue(expectedVersion)}.`);
  }
  if (onConflict !== 'reject' && onConflict !== 'overwrite' && typeof onConflict !== 'function') {
    throw new TabulaError('argument/invalid', `save({ onConflict }) must be 'reject', 'overwrite' or a merge function, got ${describeValue(onConflict)}.`);
  }
  return { expectedVersion, onConflict };
}

function saveConflict(label: string, expected: number, actual: number, gaveUp: boolean): TabulaError {
  return new TabulaError(
    'session/conflict',
    gaveUp
      ? `save() for ${label}: the session changed again under each of ${MAX_MERGE_ATTEMPTS} merges (now at version ${actual}). Nothing was written; retry later.`
      : `save() for ${label} expected version ${expected}, but the session is at version ${actual} (saved elsewhere meanwhile). ` +
          'Nothing was written. Read state() again and retry, or pass onConflict: "overwrite" or a merge function.',
  );
}

function toState(row: SessionRow): SessionState {
  return deepFreeze({ ...structuredClone(row.state), version: row.version, updatedAt: row.updatedAt });
}

function checkLast(last: unknown): number | undefined {
  if (last === undefined) return undefined;
  if (typeof last !== 'number' || !Number.isSafeInteger(last) || last < 0) {
    throw new TabulaError('argument/invalid', `messages({ last }) takes a whole number ≥ 0, got ${describeValue(last)}.`);
  }
  return last;
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
  let openTx = init.openTx ?? null;
  const release = releaser(slot, unsubscribers);
  const lease = (): BoardLease => {
    if (!slot.lease) {
      slot.lease = store.boards.acquire(userId, sessionId);
      // Touched after close(): hand back a board that refuses use, holding nothing open.
      if (closed) void slot.lease.release();
      else init.onBoard?.(slot.lease.blackboard, session);
    }
    return slot.lease;
  };
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

  const messageRows = () => db.messages.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId));

  const readMessages = async (last?: number): Promise<StoredMessage[]> => {
    const reuse = openTx;
    openTx = null;
    const rows = await read('read messages', () => readMessageRows(db, userId, sessionId, last, reuse));
    return rows.map((row) => toStoredMessage(checkMessageRow(row)));
  };

  const journalRows = () => db.journal.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId));
  const noteRows = () => db.notes.where('[userId+sessionId+order]').between(...sessionRange(userId, sessionId));

  const readJournal = async (offset = 0): Promise<JsonValue[]> => {
    const rows = await read('read the journal', () => journalRows().offset(offset).toArray());
    return rows.map((row) => checkRow('journal', row.id, row).entry);
  };

  const checkPatch = (patch: unknown, where: string): SessionStatePatch => {
    if (!isPlainObject(patch)) {
      throw new TabulaError('argument/invalid', `${where} takes a plain object of state fields (${STATE_KEYS.join(', ')}), got ${describeValue(patch)}.`);
    }
    for (const [key, value] of Object.entries(patch)) {
      const problem = findJsonProblem(value);
      if (problem) {
        throw new TabulaError('schema/invalid', `${where}: field ${formatPath([key, ...problem.path])} is not JSON: ${problem.message}.`, { issues: [problem] });
      }
    }
    const result = safeParse(StatePatchSchema, patch);
    if (!result.success) {
      throw new TabulaError(
        'schema/invalid',
        `${where} for ${label}: ${describeIssues(result.error.issues)}. Writable fields: ${STATE_KEYS.join(', ')}.`,
        { issues: result.error.issues },
      );
    }
    if (result.data.context) checkContextSchema(contextSchema, result.data.context, `save() for ${label}: state.context`);
    return result.data;
  };

  const exportData = async (): Promise<SessionExport> => {
    ensureOpen();
    try {
      return await db.transaction('r', [db.sessions, db.messages, db.journal, db.notes, db.memory], async () => {
        const row = await readRow();
        const [messages, journal, notes, memory] = await Promise.all([
          messageRows().toArray(),
          journalRows().toArray(),
          noteRows().toArray(),
          db.memory.where('[userId+sessionId+scope]').between(...sessionRange(userId, sessionId)).toArray(),
        ]);
        return {
          format: 'tabula.session' as const,
          formatVersion: 1 as const,
          userId,
          sessionId,
          createdAt: row.createdAt,
          updatedAt: row.updatedAt,
          version: row.version,
          forkOf: row.forkOf,
          prefix: row.prefix,
          state: row.state,
          messages: messages.map((m) => {
            checkMessageRow(m);
            return { id: m.id, order: m.order, createdAt: m.createdAt, status: copiedStatus(m.status), message: m.message };
          }),
          journal: { entries: journal.map((j) => checkRow('journal', j.id, j).entry), watermark: row.journalWatermark },
          notes: notes.map((n) => checkRow('notes', n.id, n)).map(({ text, runId, scope, at }) => ({ text, runId, scope, at })),
          memory: memory
            .map((m) => checkRow('memory', [m.userId, m.sessionId, m.scope, m.key], m))
            .filter((m) => !m.deleted)
            .map(({ scope, key, value }) => ({ scope, key, value: value })),
        };
      });
    } catch (error) {
      throw mapStorageError(error, `export ${label}`);
    }
  };

  const exportWithBoard = async (): Promise<SessionExport> => {
    const data = await exportData();
    const { blackboard } = lease();
    await blackboard.whenLoaded;
    return { ...data, blackboard: blackboard.toJSON() };
  };

  /** Appends; with `runLife`, only to the session of that life (a run's appends). */
  const appendMessages = async (input: Message | Message[], runLife?: string): Promise<StoredMessage[]> => {
    const list = Array.isArray(input) ? input : [input];
    const parsed = list.map((message, index) => parseMessage(message, `append() to ${label}: message[${index}]`));
    if (parsed.length === 0) return [];
    return write(`append ${parsed.length} message(s)`, async (tx) => {
      tx.existing(runLife);
      const createdAt = Date.now();
      const ops = await tx.emitAppends(parsed.map((message) => ({ id: newId(), createdAt, status: 'complete', message })));
      return ops.map((op) => toStoredMessage({ ...op.body, order: op.order }));
    }, 'append');
  };

  const runner = createRunner({ store, userId, sessionId, label, contextSchema, ...(life === undefined ? {} : { life }), append: appendMessages });

  const session: Session = {
    userId,
    sessionId,
    get blackboard() {
      return lease().blackboard;
    },

    append: (input) => appendMessages(input),

    async messages(options) {
      const { last: lastOption, scope } = checkOptions(options, 'messages(options)');
      const last = checkLast(lastOption);
      if (scope === undefined || scope === null) return readMessages(last);
      const scoped = applyScope(requireScope(scope, 'messages({ scope })'), await readMessages());
      return last === undefined ? scoped : scoped.slice(Math.max(0, scoped.length - last));
    },

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

    journal: {
      async record(entry) {
        await session.journal.apply([entry]);
      },
      async apply(entries) {
        if (!Array.isArray(entries)) throw new TabulaError('argument/invalid', 'journal.apply() takes an array of JSON entries.');
        entries.forEach((entry, index) => {
          const problem = findJsonProblem(entry);
          if (problem) {
            throw new TabulaError('schema/invalid', `journal entry [${index}] of ${label} is not JSON at ${formatPath(problem.path)}: ${problem.message}.`, { issues: [problem] });
          }
        });
        if (entries.length === 0) return;
        await write('record journal entries', async (tx) => {
          tx.existing();
          await tx.emit('journal.append', { entries });
        });
      },
      async diff() {
        return readJournal((await readRow()).journalWatermark);
      },
      async markCommitted() {
        await write('commit the journal', async (tx) => {
          const row = tx.existing();
          const last = await journalRows().last();
          if (!last) return;
          await tx.emit('journal.commit', { watermark: row.journalCount, through: last.order });
        });
      },
      async view() {
        return readJournal();
      },
    },

    async state() {
      return toState(await readRow());
    },

    async save(patch, options = {}) {
      const original = checkPatch(patch, 'save()');
      const { expectedVersion, onConflict } = checkSaveOptions(options);
      let checked = original;
      let expected = expectedVersion;
      // A merge function runs between transactions (it may be async, and IndexedDB commits a transaction
      // that waits on anything else), so its result is saved compare-and-set against the version it saw.
      for (let attempt = 1; ; attempt++) {
        const outcome = await write<{ saved: SessionState } | { conflict: SessionState }>('save state', async (tx) => {
          const row = tx.existing();
          if (expected !== undefined && row.version !== expected && onConflict !== 'overwrite') {
            if (onConflict === 'reject' || attempt > MAX_MERGE_ATTEMPTS) throw saveConflict(label, expected, row.version, attempt > MAX_MERGE_ATTEMPTS);
            return { conflict: toState(row) };
          }
          // The whole state travels with the save: a save that wins on another replica must not depend on
          // which earlier saves that replica has seen (DESIGN §3.5, convergence).
          // `base` names the save this one is built on, so a replica where another save stands can tell it was replaced.
          await tx.emit('state.save', { version: row.version + 1, patch: { ...row.state, ...checked }, base: row.versionOrder ?? '' });
          return { saved: toState(tx.existing()) };
        });
        if ('saved' in outcome) return outcome.saved;
        if (typeof onConflict !== 'function') throw new TabulaError('argument/invalid', 'unreachable: a conflict without a merge function');
        const merged: unknown = await onConflict(outcome.conflict, original);
        checked = checkPatch(merged, 'the onConflict merge function result');
        expected = outcome.conflict.version;
      }
    },

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
      const rows = await read('read notes', () => noteRows().toArray());
      return rows.map((row) => checkRow('notes', row.id, row)).map(({ id, text, runId, scope, at }) => Object.freeze({ id, text, runId, scope, at }));
    },

    memory(scope = 'default') {
      ensureOpen();
      return createMemory(store, userId, sessionId, scope, life);
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
      const [row, messages, entries] = await Promise.all([readRow(), session.messages(options), readJournal(), lease().blackboard.whenLoaded]);
      const journal = new MutationJournal<unknown>(entries.slice(0, row.journalWatermark));
      journal.apply(entries.slice(row.journalWatermark));
      return new WorkingContext({
        prefix: new PrefixContext(row.prefix),
        messages: messages.map(toWireMessage),
        // The blackboard is the scratchpad axis; write a context's changes back with blackboard.update().
        scratchpad: lease().blackboard.toJSON(),
        journal,
        tokenCounter: store.tokenCounter,
      });
    },

    async freeze() {
      return (await session.toContext()).freeze();
    },

    async fork(newSessionId, options) {
      const forkUserId = checkName(checkOptions(options, 'fork(sessionId, options)').userId ?? userId, 'fork({ userId })');
      checkName(newSessionId, 'fork(sessionId)');
      const data = await exportWithBoard();
      return init.importSession({ ...data, userId: forkUserId, sessionId: newSessionId, forkOf: { userId, sessionId } }, { userId: forkUserId, contextSchema });
    },

    async checkpoint(checkpointLabel) {
      if (checkpointLabel !== undefined && typeof checkpointLabel !== 'string') {
        throw new TabulaError('argument/invalid', 'checkpoint(label) takes a string label or nothing.');
      }
      return write('create a checkpoint', async (tx) => {
        const row = tx.existing();
        const rows = await messageRows().toArray();
        const id = newId();
        const at = Date.now();
        await tx.emit('checkpoint.create', {
          id,
          label: checkpointLabel ?? null,
          at,
          snapshot: {
            prefix: row.prefix,
            state: row.state,
            messages: rows.map(({ id: mid, order, createdAt, status, message }) => ({ id: mid, order, createdAt, status: copiedStatus(status), message })),
          },
        });
        return Object.freeze({ id, label: checkpointLabel ?? null, at });
      });
    },

    async checkpoints() {
      const rows = await read('list checkpoints', () => db.checkpoints.where('[userId+sessionId]').equals([userId, sessionId]).toArray());
      return rows.sort((a, b) => (a.order < b.order ? -1 : 1)).map(({ id, label: l, at }) => Object.freeze({ id, label: l, at }));
    },

    async restore(checkpointId) {
      if (typeof checkpointId !== 'string' || checkpointId === '') {
        throw new TabulaError('argument/invalid', `restore(checkpointId) takes the id of a checkpoint from session.checkpoints(), got ${describeValue(checkpointId)}.`);
      }
      await write('restore a checkpoint', async (tx) => {
        const row = tx.existing();
        const checkpoint = await db.checkpoints.get(checkpointId);
        if (!checkpoint || checkpoint.userId !== userId || checkpoint.sessionId !== sessionId) {
          throw new TabulaError('checkpoint/not-found', `${label} has no checkpoint ${JSON.stringify(checkpointId)}; list them with session.checkpoints().`);
        }
        checkRow('checkpoints', checkpointId, checkpoint);
        await tx.emit('checkpoint.restore', { id: checkpointId, version: row.version + 1, base: row.versionOrder ?? '' });
      });
    },

    export: exportWithBoard,

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

/**
 * The order key an import places rows after when their own does not do (`subOrder(place, index)`): the
 * delete the session life began after, or, in a first life, `IMPORTED`. Either sorts before every op of
 * the life and is the same on every replica of it; no op of the life has it as its own order key, so a
 * row placed there is known for a copy (see `DroppedWork`).
 */
function placeOf(after: string): string {
  return after === '' ? IMPORTED : after;
}

/** An id an import derives from what it copies into one session life: the same on every device that imports the same thing there. */
function importedId(kind: string, target: { userId: string; sessionId: string; after: string }, what: unknown): string {
  return `${kind}-${shortHash(JSON.stringify([target.userId, target.sessionId, target.after, what]))}`;
}

/**
 * Rewrites an export, validated by the caller (parseSessionExport), into the ops that recreate it (used
 * by import and fork). What it copies is placed by what it copies, never by this device's clock, so
 * two devices that import (or fork) one history into the same id store it once and in one order on
 * every replica: messages keep their ids and their order keys (`message.append`'s `order`); notes and
 * journal entries get ids derived from their content and the session life, in the export's order,
 * before anything written later. Every row sorts after the delete the life began after (its `after`),
 * as rows written in the life do: those before it, and all of them in a file whose messages share order
 * keys, are placed by their place in the export (see {@link placeOf}). The other ops (create, prefix,
 * state, memory) converge by their own rules: the earliest create, the last prefix and memory write, the
 * winning save (two imports' saves of one state are no conflict).
 */
export async function importInto(tx: Emitter, data: SessionExport): Promise<void> {
  await tx.emit('session.create', { createdAt: data.createdAt, forkOf: data.forkOf });
  const target = { userId: data.userId, sessionId: data.sessionId, after: tx.existing().after ?? '' };
  const place = placeOf(target.after);
  if (data.prefix.systemPrompt !== '' || data.prefix.grounding.length > 0 || data.prefix.schemaBlock !== null) {
    await tx.emit('prefix.set', { prefix: data.prefix });
  }
  if (data.version > 0) await tx.emit('state.save', { version: data.version, patch: data.state, base: '' });
  const messages = [...data.messages].sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  // A file whose messages share order keys (written by hand or another tool) orders them by its array alone.
  const tied = messages.some((m, index) => index > 0 && m.order === messages[index - 1]?.order);
  await tx.emitAppends(
    messages.map((m, index) => ({
      id: m.id,
      createdAt: m.createdAt,
      status: m.status,
      message: m.message,
      order: !tied && m.order > target.after ? m.order : subOrder(place, index),
    })),
  );
  if (data.journal.entries.length > 0) {
    const id = importedId('journal', target, data.journal.entries);
    await tx.emit('journal.append', { entries: data.journal.entries, id, order: place });
    const watermark = Math.min(data.journal.watermark, data.journal.entries.length);
    if (watermark > 0) await tx.emit('journal.commit', { watermark, through: subOrder(place, watermark - 1) });
  }
  // Two equal notes of one export are two notes: the occurrence tells them apart.
  const occurrences = new Map<string, number>();
  for (const [index, note] of data.notes.entries()) {
    const content = JSON.stringify([note.text, note.runId, note.scope, note.at]);
    const occurrence = occurrences.get(content) ?? 0;
    occurrences.set(content, occurrence + 1);
    await tx.emit('note.add', { ...note, id: importedId('note', target, [content, occurrence]), order: subOrder(place, index) });
  }
  for (const { scope, key, value } of data.memory) await tx.emit('memory.set', { scope, key, value });
}
