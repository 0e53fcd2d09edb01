/**
 * `openTabula()`: opens one IndexedDB database and hands out sessions.
 * Everything it opens (the database, the cross-tab channel) is closed by
 * `close()`; nothing is opened at import time.
 */
import type { z } from 'zod';
import { TabulaError } from '../core/errors.js';
import { DEFAULT_MAX_DRIFT_MS, createHlc } from '../core/hlc.js';
import { checkName } from '../core/names.js';
import { checkOptions, describeValue } from '../core/args.js';
import { ApproxTokenCounter, type TokenCounter } from '../core/tokens.js';
import { createLazyBoardRegistry } from '../blackboard/lazy.js';
import { EMPTY_BOARD_SEEN } from '../blackboard/lives.js';
import { lazyWorkerCounter } from './default-counter.js';
import { createChangeFeed } from './changes.js';
import { createRunCoordinator } from './coordinator.js';
import { platformLocks } from './locks.js';
import { adoptFrom } from './adopt.js';
import type { SyncEngine } from './replication/contract.js';
import { correctedClock, createSyncLink, storedClockOffset } from './replication/host.js';
import { syncNames } from './replication/keys.js';
import { createRecovery } from './recovery.js';
import { readSessionOpen } from './open-read.js';
import { listSessions } from './session-list.js';
import { requestPersistence, storageEstimate } from './storage-estimate.js';
import { mapStorageError } from './errors.js';
import { parseSessionExport, type SessionExport } from './session/export-format.js';
import { newClientId } from './ids.js';
import { createDb } from './db/schema.js';
import { checkRow, lifeOf } from './db/rows.js';
import { createHandleTracker, releaseBoth } from './handles.js';
import { createKnownRows } from './known-rows.js';
import { createSessionHandle, importInto, type Session } from './session/index.js';
import { deleteBody } from './apply/index.js';
import type { SessionOptions } from './types.js';
import { assertOpen, type StoreContext } from './context.js';
import { commit } from './writer.js';
import type { OpenTabulaOptions, Tabula } from './tabula-types.js';

export type { OpenTabulaOptions, Tabula } from './tabula-types.js';
export type { StorageEstimate } from './storage-estimate.js';
export type { AdoptResult } from './adopt.js';

const checkId = (value: unknown, what: string): string => checkName(value, what);

/** Opens (creating or upgrading) the Tabula database `name`. */
export async function openTabula(options: OpenTabulaOptions = {}): Promise<Tabula> {
  const name = checkId(options.name ?? 'tabula', 'openTabula({ name })');
  const defaultUserId = checkId(options.userId ?? 'anonymous', 'openTabula({ userId })');
  if (typeof indexedDB === 'undefined') {
    throw new TabulaError('storage/failed', 'IndexedDB is not available here. In Node, load fake-indexeddb (import "fake-indexeddb/auto") before openTabula().');
  }
  const onError = options.onError ?? ((error: TabulaError) => console.warn(`[tabula] ${error.message}`, error.cause ?? ''));
  // The device's clock as it is when the Tabula opens (a test injects a skewed one by replacing Date.now meanwhile).
  const clock = correctedClock(Date.now);
  const now = (): number => clock.now();
  const db = createDb(name);
  const opening = db.open();
  // The open is a round trip to the browser's IndexedDB process; the set-up below (a BroadcastChannel, mostly:
  // 0.05–0.2 ms in Chromium) runs while it is under way. Dexie sends the request from a microtask: yielding once
  // puts it on its way first.
  await Promise.resolve();
  // A counter we create is ours to close; one the caller passed is theirs.
  const ownCounter = options.tokenCounter ? null : typeof Worker === 'function' ? lazyWorkerCounter() : null;
  const counter: TokenCounter = options.tokenCounter ?? ownCounter ?? new ApproxTokenCounter();
  const store: StoreContext = {
    db,
    name,
    // With sync the clock does not follow keys from a clock far ahead: one such key would order every later
    // write of this tab, in every session, as far ahead, and the server refuses ops past the same bound.
    // Without sync nothing bounds what a write may be ordered after: the session's own order comes first.
    clock: createHlc({ clientId: newClientId(), wallClock: now, maxDriftMs: options.sync ? DEFAULT_MAX_DRIFT_MS : Infinity }),
    now,
    feed: createChangeFeed(name, onError),
    knownRows: createKnownRows(),
    tokenCounter: counter,
    defaultUserId,
    onError,
    coordinator: createRunCoordinator(name, platformLocks(), onError),
    openStreams: new Set(),
    activeRuns: new Map(),
    background: new Set(),
    // Yjs loads on the first use of a board (see lazy.ts): a page that never opens one never fetches it.
    boards: createLazyBoardRegistry({
      name,
      peerId: newClientId(),
      onError,
      // A session's life is named by its create op: a session created again after a delete gets a new board.
      lifeOf: async (userId, sessionId) => {
        const row = await db.sessions.get([userId, sessionId]);
        return row && lifeOf(row);
      },
      // Each board change stored in any tab is announced to the sync leader, in whichever tab it runs.
      onLocalUpdate: (userId: string, sessionId: string) => link.boardChanged(userId, sessionId),
    }),
    closed: false,
  };
  // A change another tab made makes the row this tab knows stale: the next append reads it. (This tab's own
  // commits, and the pages its sync applies, set their rows themselves: see after-commit.ts.)
  const stopForgetting = store.feed.subscribeAll((change) => {
    if (change.origin === 'tab') store.knownRows.set(change.userId, change.sessionId, undefined);
  });
  const link = createSyncLink(store, defaultUserId, options.sync !== undefined);
  store.sync = link.sync;
  const recovery = createRecovery(store);
  const handles = createHandleTracker(onError);
  /** Closes what the set-up made: the last step of close(), and all of it when openTabula() fails after the set-up. */
  const tearDown = async () => {
    await store.boards.close();
    store.closed = true;
    recovery.close();
    stopForgetting();
    store.knownRows.clear();
    store.coordinator.close();
    store.feed.close();
    link.close();
    ownCounter?.close();
    db.close();
  };
  try {
    await opening;
    // Before any write: a device that measured its clock against the server orders writes made offline by it too.
    const offset = await storedClockOffset(db, defaultUserId);
    if (offset !== undefined) clock.setOffsetMs(offset);
  } catch (error) {
    await tearDown();
    throw mapStorageError(error, `open the IndexedDB database "${name}"`);
  }
  let engine: SyncEngine | null = null;
  // This tab's clock id, so that a save made here is recognised when another device's save beats it: with
  // sync off too, as what a tab without sync writes is pushed later (or by another tab's leader).
  try {
    await db.meta.put({ key: syncNames.localClock(store.clock.clientId), value: true });
  } catch (error) {
    await tearDown();
    throw mapStorageError(error, 'record this tab\'s clock');
  }
  if (options.sync) {
    try {
      await link.seed();
    } catch (error) {
      await tearDown();
      throw mapStorageError(error, 'queue the existing sessions for sync');
    }
    engine = link.start(options.sync, clock);
  }

  const handleFor = (userId: string, sessionId: string, contextSchema: z.ZodObject | undefined, life: string, openTx: IDBTransaction | null = null): Session => {
    const { session, release } = createSessionHandle({
      store,
      userId,
      sessionId,
      contextSchema,
      openTx,
      life,
      importSession: importData,
      onBoard: (blackboard, handle) => handles.keepAliveWith(blackboard, handle),
    });
    // A stream started in another tab gets a watcher here, so its tab crashing is noticed at once.
    const stopWatching = store.feed.subscribe(userId, sessionId, (change) => {
      // After the app's own listeners of this change: they hear of it before the recovery check starts its reads.
      if (change.origin === 'tab' && change.kinds.includes('message.append')) queueMicrotask(() => recovery.schedule(userId, sessionId));
    });
    return handles.track(session, releaseBoth(stopWatching, release));
  };

  async function open(sessionId: string, options?: SessionOptions): Promise<Session> {
    assertOpen(store);
    checkId(sessionId, 'session(sessionId)');
    const opts = checkOptions(options, 'session(sessionId, options)');
    const userId = checkId(opts.userId ?? defaultUserId, 'session({ userId })');
    let read;
    try {
      read = await readSessionOpen(db, userId, sessionId);
    } catch (error) {
      throw mapStorageError(error, `open session "${sessionId}"`);
    }
    const { row, unfinished, tx } = read;
    let life: string;
    if (row !== undefined) {
      const existing = checkRow('sessions', [userId, sessionId], row);
      store.knownRows.set(userId, sessionId, existing);
      life = lifeOf(existing);
      try {
        await recovery.check(userId, sessionId, unfinished);
      } catch (error) {
        throw mapStorageError(error, `recover session "${sessionId}"`);
      }
    } else {
      // Opening an existing session is a read; only a new one costs a write transaction.
      life = await commit(store, userId, sessionId, `create session "${sessionId}"`, async (tx) => {
        const found = tx.row();
        if (found) return lifeOf(found);
        await tx.emit('session.create', { createdAt: now(), forkOf: null });
        const created = tx.row();
        // Never hand out a handle to a session that was not created: every write through it would fail.
        if (!created) throw new TabulaError('storage/failed', `Session "${sessionId}" of user "${userId}" could not be created over its deleted predecessor.`);
        return lifeOf(created);
      });
    }
    // The handle is bound to the life it was opened on. A handle to a session just created reads in a
    // transaction of its own: the one read in has ended.
    return handleFor(userId, sessionId, opts.contextSchema, life, row === undefined ? null : tx);
  }

  /**
   * Imports under `userId`, whoever the file names: a session filed under a user this Tabula does not
   * act for could be neither seen nor deleted through it.
   */
  async function importData(data: SessionExport, options: { userId: string; contextSchema?: z.ZodObject | undefined }): Promise<Session> {
    assertOpen(store);
    const userId = checkId(options.userId, 'importSession({ userId })');
    const parsed = { ...parseSessionExport(data), userId };
    const life = await commit(store, parsed.userId, parsed.sessionId, `import session "${parsed.sessionId}"`, async (tx) => {
      if (tx.row()) {
        throw new TabulaError(
          'session/exists',
          `Session "${parsed.sessionId}" of user "${parsed.userId}" already exists; delete it first or import under another sessionId.`,
        );
      }
      await importInto(tx, parsed);
      return lifeOf(tx.existing());
    });
    const handle = handleFor(parsed.userId, parsed.sessionId, options.contextSchema, life);
    if (parsed.blackboard && Object.keys(parsed.blackboard).length > 0) {
      await handle.blackboard.whenLoaded;
      handle.blackboard.update(parsed.blackboard);
      await handle.blackboard.flushed();
    }
    return handle;
  }

  /**
   * What this replica has of the board of the session's current life, for its delete to say (deleteBody's
   * `board`); undefined for a session not here, or of a life that names no `seen`. Read before the delete's
   * transaction: the board is in a database of its own.
   */
  const boardBeforeDelete = async (userId: string, sessionId: string): Promise<{ life: string; seen: string } | undefined> => {
    let row;
    try {
      row = await db.sessions.get([userId, sessionId]);
    } catch (error) {
      throw mapStorageError(error, `delete session "${sessionId}"`);
    }
    if (!row?.seen) return undefined;
    const life = lifeOf(row);
    try {
      return { life, seen: await store.boards.boardSeen(userId, sessionId, life) };
    } catch (error) {
      store.onError(mapStorageError(error, `read the blackboard of session "${sessionId}" for its delete`));
      // Said as empty: a device with board edits of this life then names them all (some perhaps seen), never none.
      return { life, seen: EMPTY_BOARD_SEEN };
    }
  };

  /** The close under way or done; null again after a close that failed, so that a later one tries again. */
  let closing: Promise<void> | null = null;

  return {
    session: open,

    async sessions(query) {
      assertOpen(store);
      return listSessions(db, checkId(checkOptions(query, 'sessions(query)').userId ?? defaultUserId, 'sessions({ userId })'));
    },

    async deleteSession(sessionId, options) {
      checkId(sessionId, 'deleteSession(sessionId)');
      const userId = checkId(checkOptions(options, 'deleteSession(sessionId, options)').userId ?? defaultUserId, 'deleteSession({ userId })');
      assertOpen(store);
      const board = await boardBeforeDelete(userId, sessionId);
      const life = await commit(store, userId, sessionId, `delete session "${sessionId}"`, async (tx) => {
        const row = tx.row();
        // The delete says what this replica has of the life, so a device with work it never saw can be told.
        if (row) await tx.emit('session.delete', deleteBody(row, board && board.life === lifeOf(row) ? board.seen : undefined));
        return row && lifeOf(row);
      });
      try {
        await store.boards.destroy(userId, sessionId, life);
      } catch (error) {
        throw mapStorageError(error, `delete the blackboard of session "${sessionId}"`);
      }
    },

    importSession: (data) => importData(data, { userId: defaultUserId }),

    adopt: (fromUserId) => adoptFrom(store, recovery, fromUserId),

    subscribe(listener) {
      if (typeof listener !== 'function') throw new TabulaError('argument/invalid', `tabula.subscribe(listener) takes a function, got ${describeValue(listener)}.`);
      assertOpen(store);
      return store.feed.subscribeAll(listener);
    },

    storage: storageEstimate,
    requestPersistence,

    sync: engine,

    close() {
      // One close for every caller: a second close() while the first runs waits for it, not running its steps again.
      return (closing ??= (async () => {
        await engine?.close();
        // An unfinished stream is interrupted, not left dangling: its text so far is kept.
        await Promise.all([...store.openStreams].map((stream) => stream.abort().catch(() => undefined)));
        await handles.closeAll();
        await Promise.allSettled([...store.background]);
        await tearDown();
      })().catch((error: unknown) => {
        closing = null;
        throw error;
      }));
    },
  };
}
