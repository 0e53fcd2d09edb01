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
import { WorkingContext } from '../../core/context.js';
import { TabulaError } from '../../core/errors.js';
import { MutationJournal } from '../../core/journal.js';
import { checkOptions, describeValue } from '../../core/args.js';
import type { PrefixData } from '../../core/ops.js';
import { PrefixContext } from '../../core/prefix.js';
import { assertOpen, type StoreContext } from '../context.js';
import { checkRow, type SessionRow } from '../db/rows.js';
import { mapStorageError } from '../errors.js';
import { createMemory } from '../memory.js';
import { addNote } from '../notes.js';
import { createRunner } from '../runs.js';
import { countSessionTokens } from '../session-tokens.js';
import { toWireMessage } from '../stored.js';
import { openStream } from '../stream.js';
import { commit, sessionNotFound, type Emitter, type WriteScope } from '../writer.js';
import { createCheckpoint, exportSession, forkSession, listCheckpoints, restoreCheckpoint } from './copy.js';
import { createJournal, readJournal } from './journal.js';
import { createMessages } from './messages.js';
import type { Session, SessionImporter } from './types.js';
import { noteRows, type HandleScope } from './scope.js';
import { saveState, toState } from './state.js';

export { importInto } from './copy.js';
export type { SessionJournal } from './journal.js';

export type { Session, SessionImporter } from './types.js';

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
