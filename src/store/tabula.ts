/**
 * `openTabula()`: opens one IndexedDB database and hands out sessions.
 * Everything it opens (the database, the cross-tab channel) is closed by
 * `close()`; nothing is opened at import time.
 */
import type { z } from 'zod';
import { TabulaError } from '../core/errors.js';
import { DEFAULT_MAX_DRIFT_MS, createHlc, hlcOf, parseHlc } from '../core/hlc.js';
import { checkName } from '../core/names.js';
import { checkOptions, describeValue } from '../core/args.js';
import { ApproxTokenCounter, type TokenCounter } from '../core/tokens.js';
import { createLazyBoardRegistry } from '../blackboard/lazy.js';
import { blackboardDatabaseName } from '../blackboard/lives.js';
import { lazyWorkerCounter } from './default-counter.js';
import { createChangeFeed, type SessionChange } from './changes.js';
import { createRunCoordinator } from './coordinator.js';
import { platformLocks } from './locks.js';
import { createBoardNotices, type BoardNotices } from './board-notices.js';
import { adoptSession, finishAdopted, unfinishedAdoptions } from './adopt.js';
import { seedOutbox } from './sync-seed.js';
import { SYNC_NUDGE, syncNames, type SyncAdapter, type SyncBoards, type SyncEngine, type SyncHandle } from './sync-host.js';
import { createRecovery } from './recovery.js';
import { readSessionOpen } from './open-read.js';
import { mapStorageError } from './errors.js';
import { parseSessionExport, type SessionExport } from './export.js';
import { newClientId } from './ids.js';
import { createDb, checkRow, lifeOf, userSessionRows } from './schema.js';
import { createHandleTracker, releaseBoth } from './handles.js';
import { createKnownRows } from './known-rows.js';
import { createSessionHandle, importInto, type Session } from './session.js';
import { deleteBody } from './apply/index.js';
import type { SessionInfo, SessionOptions } from './types.js';
import { assertOpen, commit, type StoreContext } from './writer.js';

export interface OpenTabulaOptions {
  /** IndexedDB database name. @default 'tabula' */
  name?: string;
  /** The user of `session()` calls that name none. @default 'anonymous' */
  userId?: string;
  /**
   * Counts tokens for `session.tokens()` and contexts.
   * @default the worker counter (o200k_base, shared worker) where Worker exists, else ApproxTokenCounter
   */
  tokenCounter?: TokenCounter;
  /** Keeps this user's sessions on a sync server: `httpSync({ url, token })` from `tabula-sdk/sync`. */
  sync?: SyncAdapter;
  /** Receives problems that are reported, not thrown: a malformed message from another tab, a failed cache write. @default console.warn */
  onError?: (error: TabulaError) => void;
}

export interface StorageEstimate {
  /** Bytes this origin uses. */
  usage: number;
  /** Bytes this origin may use. */
  quota: number;
  /** Whether the browser promised not to evict this origin's data. */
  persisted: boolean;
}

/** An open Tabula database. */
export interface Tabula {
  /** Opens a session, creating it when it does not exist. */
  session(sessionId: string, options?: SessionOptions): Promise<Session>;
  /** The user's sessions, newest (last changed) first. */
  sessions(query?: { userId?: string }): Promise<SessionInfo[]>;
  /** Deletes a session and everything kept with it. */
  deleteSession(sessionId: string, options?: { userId?: string }): Promise<void>;
  /** Recreates a session from `session.export()` output under this Tabula's user (whoever the file names); refuses an id that exists. */
  importSession(data: SessionExport): Promise<Session>;
  /** Storage use of this origin (zeros where the StorageManager API is missing). */
  storage(): Promise<StorageEstimate>;
  /** Asks the browser to keep this origin's data under storage pressure; false where unsupported or refused. */
  requestPersistence(): Promise<boolean>;
  /**
   * Listens to every session's committed changes (this tab, other tabs,
   * sync), e.g. to keep a list of sessions current; returns the unsubscribe
   * function. `session.subscribe()` listens to one session.
   */
  subscribe(listener: (change: SessionChange) => void): () => void;
  /**
   * Moves the sessions of user `fromUserId` on this profile (a guest's, say the default `'anonymous'`
   * before sign-in) to this Tabula's user, as that user's sessions: messages, prefix, state, journal,
   * notes, memory, checkpoints and board, with their ids and order keys. They are queued for sync under
   * this user (when this user syncs here), and the originals are deleted. A session whose id this user
   * already has, or one with a reply still streaming, stays where it is and is listed in `kept`. Each
   * session moves in one transaction and its copy is recognised, so an adopt cut short (a crash, a closed
   * tab) is finished by calling it again.
   */
  adopt(fromUserId: string): Promise<AdoptResult>;
  /** Sync controls and status; null without `openTabula({ sync })`. */
  readonly sync: SyncHandle | null;
  close(): Promise<void>;
}

/** What {@link Tabula.adopt} did: the session ids it moved, and those it left with the other user. */
export interface AdoptResult {
  readonly adopted: readonly string[];
  readonly kept: readonly string[];
}

/** Meta keys naming the clocks of this profile's tabs that wrote with sync on. */
const LOCAL_CLOCK_PREFIX = 'sync:clock:';

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
  const wallClock = Date.now;
  /** Server time minus device time, as sync last measured it for this Tabula's user (see SyncClock). */
  let clockOffsetMs = 0;
  const now = (): number => wallClock() + clockOffsetMs;
  const db = createDb(name);
  const opening = db.open();
  // The open is a round trip to the browser's IndexedDB process; the set-up below (a BroadcastChannel, mostly:
  // 0.05–0.2 ms in Chromium) runs while it is under way. Dexie sends the request from a microtask: yielding once
  // puts it on its way first.
  await Promise.resolve();
  // A counter we create is ours to close; one the caller passed is theirs.
  const ownCounter = options.tokenCounter ? null : typeof Worker === 'function' ? lazyWorkerCounter() : null;
  const counter: TokenCounter = options.tokenCounter ?? ownCounter ?? new ApproxTokenCounter();
  // Each board change stored in any tab is announced to the sync leader (in whichever tab it runs): a tab
  // without sync opens the channel on its first board change.
  let boardNotices: BoardNotices | null = options.sync ? createBoardNotices(name, onError) : null;
  /** Set as the notices close: a board change stored after that (its flush outlived the registry) is announced by no one. */
  let noticesClosed = false;
  /** Channels to other tabs' sync engines, by user, opened on the first write of that user that queued rows. */
  const engineChannels = new Map<string, BroadcastChannel>();
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
      onLocalUpdate: (userId: string, sessionId: string) => {
        // A closed channel throws on postMessage, and one opened now would never be closed; the next leader's first look finds the change.
        if (!noticesClosed) (boardNotices ??= createBoardNotices(name, onError)).announce(userId, sessionId);
      },
    }),
    closed: false,
  };
  // A change made elsewhere (another tab, sync) makes the row this tab knows stale: the next append reads it.
  const stopForgetting = store.feed.subscribeAll((change) => {
    if (change.origin !== 'local') store.knownRows.set(change.userId, change.sessionId, undefined);
  });
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
    noticesClosed = true;
    boardNotices?.close();
    for (const channel of engineChannels.values()) channel.close();
    ownCounter?.close();
    db.close();
  };
  try {
    await opening;
    // Before any write: a device that measured its clock against the server orders writes made offline by it too.
    // The user's own, or what another user measured here (the device's clock is the same; the server usually too).
    const offsets = (await db.meta.bulkGet([syncNames.clockOffset(defaultUserId), syncNames.profileClockOffset])).map((row) => row?.value);
    const offset = offsets.find((value): value is number => typeof value === 'number' && Number.isFinite(value));
    if (offset !== undefined) clockOffsetMs = offset;
  } catch (error) {
    await tearDown();
    throw mapStorageError(error, `open the IndexedDB database "${name}"`);
  }
  let engine: SyncEngine | null = null;
  store.sync = {
    userId: options.sync ? defaultUserId : null,
    nudge(userId, queued) {
      if (engine && userId === defaultUserId) return engine.nudge(queued);
      // Rows of a user whose engine runs elsewhere (a tab without sync writing for a user who syncs here): their leader pushes them.
      if (typeof BroadcastChannel !== 'function') return;
      let channel = engineChannels.get(userId);
      if (!channel) engineChannels.set(userId, (channel = new BroadcastChannel(syncNames.channel(name, userId))));
      channel.postMessage(SYNC_NUDGE);
    },
  };
  if (options.sync) {
    try {
      await seedOutbox(db, defaultUserId);
    } catch (error) {
      await tearDown();
      throw mapStorageError(error, 'queue the existing sessions for sync');
    }
    // This tab's clock id, so that a save made here is recognised when another device's save beats it.
    await db.meta.put({ key: `${LOCAL_CLOCK_PREFIX}${store.clock.clientId}`, value: true });
    engine = options.sync.start({
      db,
      name,
      userId: defaultUserId,
      locks: platformLocks(),
      onError,
      isLocalOrder: async (order) => (await db.meta.get(`${LOCAL_CLOCK_PREFIX}${parseHlc(hlcOf(order)).clientId}`)) !== undefined,
      publish: (changes) => {
        for (const change of changes) {
          store.feed.publish(change, 'remote');
          // A create can end a life too: one of a life past this replica's last delete proves that delete (see store/apply/, "session lives").
          if (change.kinds.includes('session.delete') || change.kinds.includes('session.create')) pruneBoards(store, change.userId, change.sessionId);
        }
      },
      boards: syncBoards(store, defaultUserId, boardNotices as BoardNotices),
      knownRows: store.knownRows,
      clock: {
        wallMs: () => wallClock(),
        offsetMs: () => clockOffsetMs,
        setOffsetMs(offsetMs) {
          if (Number.isFinite(offsetMs)) clockOffsetMs = offsetMs;
        },
        receive(order) {
          store.clock.receive(hlcOf(order));
        },
      },
    });
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

  /** The close under way or done; null again after a close that failed, so that a later one tries again. */
  let closing: Promise<void> | null = null;

  return {
    session: open,

    async sessions(query) {
      assertOpen(store);
      const userId = checkId(checkOptions(query, 'sessions(query)').userId ?? defaultUserId, 'sessions({ userId })');
      let rows;
      try {
        rows = await db.sessions
          .where('[userId+updatedAt]')
          .between([userId, -Infinity], [userId, Infinity], true, true)
          .reverse()
          .toArray();
      } catch (error) {
        throw mapStorageError(error, `list the sessions of user "${userId}"`);
      }
      return rows.map((row) => {
        checkRow('sessions', [row.userId, row.sessionId], row);
        return Object.freeze({
          userId: row.userId,
          sessionId: row.sessionId,
          version: row.version,
          messageCount: row.messageCount,
          summary: row.state.summary,
          createdAt: row.createdAt,
          updatedAt: row.updatedAt,
          forkOf: row.forkOf,
        });
      });
    },

    async deleteSession(sessionId, options) {
      checkId(sessionId, 'deleteSession(sessionId)');
      const userId = checkId(checkOptions(options, 'deleteSession(sessionId, options)').userId ?? defaultUserId, 'deleteSession({ userId })');
      const life = await commit(store, userId, sessionId, `delete session "${sessionId}"`, async (tx) => {
        const row = tx.row();
        // The delete says what this replica has of the life, so a device with work it never saw can be told.
        if (row) await tx.emit('session.delete', deleteBody(row));
        return row && lifeOf(row);
      });
      try {
        await store.boards.destroy(userId, sessionId, life);
      } catch (error) {
        throw mapStorageError(error, `delete the blackboard of session "${sessionId}"`);
      }
    },

    importSession: (data) => importData(data, { userId: defaultUserId }),

    async adopt(fromUserId) {
      assertOpen(store);
      const from = checkId(fromUserId, 'adopt(fromUserId)');
      if (from === defaultUserId) {
        throw new TabulaError('argument/invalid', `adopt(fromUserId) moves another user's sessions to this Tabula's user "${defaultUserId}"; it was given that user.`);
      }
      const adopted: string[] = [];
      const kept: string[] = [];
      try {
        for (const sessionId of await unfinishedAdoptions(db, defaultUserId)) await finishAdopted(store, defaultUserId, sessionId);
        for (const { sessionId } of await userSessionRows(db, from)) {
          // A reply whose tab is gone is marked interrupted first (as opening the session would), so it can move.
          const { row, unfinished } = await readSessionOpen(db, from, sessionId);
          if (row) await recovery.check(from, sessionId, unfinished);
          ((await adoptSession(store, from, defaultUserId, sessionId)) ? adopted : kept).push(sessionId);
        }
      } catch (error) {
        throw mapStorageError(error, `adopt the sessions of user "${from}"`);
      }
      return { adopted, kept };
    },

    subscribe(listener) {
      if (typeof listener !== 'function') throw new TabulaError('argument/invalid', `tabula.subscribe(listener) takes a function, got ${describeValue(listener)}.`);
      assertOpen(store);
      return store.feed.subscribeAll(listener);
    },

    async storage() {
      const manager = typeof navigator === 'object' ? navigator.storage : undefined;
      if (!manager?.estimate) return { usage: 0, quota: 0, persisted: false };
      const [estimate, persisted] = await Promise.all([manager.estimate(), manager.persisted ? manager.persisted() : Promise.resolve(false)]);
      return { usage: estimate.usage ?? 0, quota: estimate.quota ?? 0, persisted };
    },

    async requestPersistence() {
      const manager = typeof navigator === 'object' ? navigator.storage : undefined;
      if (!manager?.persist) return false;
      try {
        return await manager.persist();
      } catch {
        return false;
      }
    },

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

/**
 * A session deleted on another device (or created in a life past the last
 * delete known here, which proves that delete): its board closes in every
 * tab here and its database goes, as a local delete's does. Lives are named
 * per replica, so every life but the current one (the session may have been
 * created again in the same pull) ends. close() waits for it.
 */
function pruneBoards(store: StoreContext, userId: string, sessionId: string): void {
  const pruning: Promise<void> = store.db.sessions
    .get([userId, sessionId])
    .then((row) => store.boards.prune(userId, sessionId, row && lifeOf(row)))
    .catch((error: unknown) => store.onError(mapStorageError(error, `delete the blackboard of session "${sessionId}", deleted on another device`)))
    .finally(() => store.background.delete(pruning));
  store.background.add(pruning);
}

/** The sync engine's access to the user's blackboards (see {@link SyncBoards}). */
function syncBoards(store: StoreContext, userId: string, notices: BoardNotices): SyncBoards {
  const { db, name } = store;
  return {
    async sessions() {
      const rows = await userSessionRows(db, userId);
      // Only boards with a database can hold something; where the browser cannot list databases, look at all.
      const listed = typeof indexedDB.databases === 'function' ? new Set((await indexedDB.databases()).map((info) => info.name)) : null;
      return rows.filter((row) => !listed || listed.has(blackboardDatabaseName(name, userId, row.sessionId, lifeOf(row)))).map((row) => row.sessionId);
    },
    async open(sessionId) {
      const row = store.closed ? undefined : await db.sessions.get([userId, sessionId]);
      if (!row) return null;
      // A board of an earlier life may still be open here (a session handle holds it, and a delete pulled
      // from another device ends it only once announced): acquire would hand it out. Its life is over: the
      // stored row names the current one (lives are told apart by name, not ordered by it).
      const stale = store.boards.openLife(userId, sessionId);
      if (stale !== undefined && stale !== lifeOf(row)) await store.boards.destroy(userId, sessionId, stale);
      const lease = store.boards.acquire(userId, sessionId);
      try {
        await lease.blackboard.whenLoaded;
        await lease.blackboard.flushed();
      } catch {
        // Deleted (here or in another tab) while it opened.
        await lease.release();
        return null;
      }
      // The board goes with the life `row` names only if no delete and re-create came in between (lives only grow).
      const now = await db.sessions.get([userId, sessionId]);
      if (!now || lifeOf(now) !== lifeOf(row)) {
        await lease.release();
        return null;
      }
      return {
        doc: lease.blackboard.doc,
        ...(row.after === undefined ? {} : { after: row.after }),
        flushed: () => lease.blackboard.flushed(),
        release: () => lease.release(),
      };
    },
    onLocalChange(listener) {
      return notices.subscribe((changedUser, sessionId) => {
        if (changedUser === userId) listener(sessionId);
      });
    },
  };
}
