/**
 * One live Y.Doc per open session in this tab, shared by every handle of
 * that session (so two handles see each other's writes at once), with its
 * IndexedDB persistence and its cross-tab provider. Reference-counted:
 * the last handle to close closes the doc, the provider and the channel.
 *
 * Lives. A session deleted and created again under the same id is a new
 * *life* (its `lifeOf` id differs). Each life has its own database and its
 * own cross-tab channel, both named after the life, so a tab still holding
 * the old life can neither sync nor persist anything into the new one,
 * whatever order the tabs learn of the delete in. A delete is announced to
 * every tab (and seen as `versionchange` on the deleted database); there the
 * old life's board closes and refuses writes with `session/not-found`.
 * A lease asked for a given life (a session handle's) is of that life only:
 * acquired after the life ended, even with the session created again, its
 * board is born closed and refuses writes with `session/not-found`, rather
 * than opening the new life's board.
 */
import * as Y from 'yjs';
import { TabulaError } from '../core/errors.js';
import { createBlackboard } from './blackboard.js';
import { blackboardDatabaseName, boardChannelName, boardLivesOnDisk, deleteDocDatabase, isLifeEnded, livesChannelName, readBoardUpdates, REMOTE_ORIGIN, type LifeEnded } from './lives.js';
import { persistDoc, type DocPersistence } from './persistence.js';
import { boardSeenOf, docOfUpdates, unseenBoardKeys } from './seen.js';
import { TabSyncProvider, broadcastTransport } from './tab-provider.js';
import type { BoardRegistry, BoardRegistryOptions } from './registry-types.js';

export { REMOTE_ORIGIN, blackboardDatabaseName } from './lives.js';

export type { BoardLease, BoardRegistry, BoardRegistryOptions } from './registry-types.js';

interface Entry {
  /** Its key in the registry's entries: the session and the life it was asked for. */
  readonly key: string;
  readonly userId: string;
  readonly sessionId: string;
  /** The life its leases were asked for; undefined: the session's current life. */
  readonly expected: string | undefined;
  refs: number;
  /** Why the board refuses writes: released here, or its life ended. */
  closedBy: 'close' | 'delete' | null;
  readonly doc: Y.Doc;
  /** The life, once known. */
  life: string | undefined;
  persistence: DocPersistence | null;
  /** The name of the database `persistence` opened (null until then). */
  database: string | null;
  provider: TabSyncProvider | null;
  whenLoaded: Promise<void>;
  /** Resolves once the life is known and persistence (if any) is open. */
  readonly started: Promise<void>;
}

/** Calls `notify` after this tab's changes to the entry's doc are stored (one call per stored batch). */
function notifyLocalUpdates(entry: Entry, persistence: DocPersistence, notify: (userId: string, sessionId: string) => void): void {
  let flushing = false;
  let again = false;
  const flush = () => {
    flushing = true;
    again = false;
    persistence.flushed().then(
      () => {
        flushing = false;
        notify(entry.userId, entry.sessionId);
        if (again && !entry.closedBy) flush();
      },
      // Closed or deleted meanwhile: the sync client's scan on start finds whatever was stored.
      () => (flushing = false),
    );
  };
  entry.doc.on('update', (_update: Uint8Array, origin: unknown) => {
    if (origin === REMOTE_ORIGIN || origin === entry.provider || origin === persistence.provider) return;
    if (flushing) again = true;
    else flush();
  });
}

export function createBoardRegistry(options: BoardRegistryOptions): BoardRegistry {
  /** By session and the life asked for (a handle's): one doc per life, shared by that life's leases. */
  const entries = new Map<string, Entry>();
  /**
   * The lives of each session known to have ended, so a board of one acquired late is born closed. A set,
   * not the greatest: a life is named by the order of the create that made it on its replica, and a life
   * pulled from another device can be named lower than one this device ended before it.
   */
  const ended = new Map<string, Set<string>>();
  const key = (userId: string, sessionId: string) => JSON.stringify([userId, sessionId]);
  const entryKey = (userId: string, sessionId: string, life: string | undefined) => JSON.stringify([userId, sessionId, life ?? null]);
  const entriesOf = (userId: string, sessionId: string) => [...entries.values()].filter((entry) => entry.userId === userId && entry.sessionId === sessionId);
  const transport = options.transport ?? broadcastTransport;
  const lifeOf = options.lifeOf ?? (() => Promise.resolve(''));
  const lives = typeof BroadcastChannel === 'function' ? new BroadcastChannel(livesChannelName(options.name)) : null;
  const isEnded = (k: string, life: string | undefined) => {
    if (life === undefined) return true;
    return ended.get(k)?.has(life) ?? false;
  };

  const shut = async (entry: Entry, why: 'close' | 'delete') => {
    if (entry.closedBy) return;
    entry.closedBy = why;
    // An entry leaves the map only here, on its first shut, and acquire() adds one only where the map has
    // none: so the map still holds this one (unless it was born closed, and never in it).
    if (entries.get(entry.key) === entry) entries.delete(entry.key);
    await entry.started;
    entry.provider?.close();
    await entry.persistence?.close();
    entry.doc.destroy();
    // A tab that opened the ended life's database after it was deleted created it afresh: remove that orphan.
    if (why === 'delete' && entry.database !== null) await deleteDocDatabase(entry.database);
  };

  /** Learns the life, then (unless it has ended) connects the doc to that life's channel and database. */
  const start = async (k: string, entry: Entry, markStarted: () => void): Promise<void> => {
    const { userId, sessionId, doc } = entry;
    let current: string | undefined;
    try {
      current = await lifeOf(userId, sessionId);
    } catch (error) {
      options.onError(new TabulaError('storage/failed', `Could not read which life of session "${sessionId}" the blackboard belongs to.`, { cause: error }));
      current = undefined;
    }
    // Lives only grow: a life asked for that is not the current one has ended (the session was deleted,
    // perhaps created again), and its leases must not open the new life's board.
    entry.life = current !== undefined && entry.expected !== undefined && current !== entry.expected ? undefined : current;
    // Gone before it could open (deleted meanwhile here or in another tab): nothing to load or sync.
    // A board merely released meanwhile still opens, so what was written to it is stored.
    if (entry.closedBy === 'delete' || isEnded(k, entry.life)) {
      markStarted();
      await shut(entry, 'delete');
      return;
    }
    const life = entry.life as string;
    // The provider subscribes to updates first, so a change is on its way to the other tabs
    // before y-indexeddb starts its IndexedDB transaction for it.
    const provider = new TabSyncProvider(doc, {
      peerId: options.peerId,
      transport: transport(boardChannelName(options.name, userId, sessionId, life)),
      onError: options.onError,
      resyncIntervalMs: options.resyncIntervalMs,
    });
    const database = blackboardDatabaseName(options.name, userId, sessionId, life);
    const persistence = persistDoc(database, doc, {
      onError: options.onError,
      // Another tab deleted this life's database: the life has ended.
      onDeleted: () => {
        shut(entry, 'delete').catch((error: unknown) => options.onError(new TabulaError('storage/failed', `Could not close the deleted blackboard of session "${sessionId}".`, { cause: error })));
      },
    });
    entry.provider = provider;
    entry.persistence = persistence;
    entry.database = database;
    if (options.onLocalUpdate) notifyLocalUpdates(entry, persistence, options.onLocalUpdate);
    markStarted();
    provider.resync();
    await persistence.whenLoaded;
  };

  const open = (k: string, userId: string, sessionId: string, expected: string | undefined): Entry => {
    let markStarted!: () => void;
    const started = new Promise<void>((resolve) => (markStarted = resolve));
    const entry: Entry = {
      key: entryKey(userId, sessionId, expected),
      userId,
      sessionId,
      expected,
      refs: 0,
      closedBy: null,
      doc: new Y.Doc(),
      life: undefined,
      persistence: null,
      database: null,
      provider: null,
      started,
      whenLoaded: Promise.resolve(),
    };
    entry.whenLoaded = start(k, entry, markStarted);
    return entry;
  };

  const endLife = async (userId: string, sessionId: string, life: string, announce: boolean) => {
    const k = key(userId, sessionId);
    const endedLives = ended.get(k);
    if (endedLives) endedLives.add(life);
    else ended.set(k, new Set([life]));
    if (announce) lives?.postMessage({ v: 1, userId, sessionId, life } satisfies LifeEnded);
    for (const entry of entriesOf(userId, sessionId)) {
      await entry.started;
      if (isEnded(k, entry.life)) await shut(entry, 'delete');
    }
  };

  /** Life `life` of the session's board as this replica has it: the doc open in this tab, or one read from its database (null when nothing is stored). */
  const contentOf = async (userId: string, sessionId: string, life: string): Promise<Y.Doc | null> => {
    const open = entriesOf(userId, sessionId).find((entry) => entry.life === life && !entry.closedBy);
    if (open) {
      await open.whenLoaded;
      if (!open.closedBy) return open.doc;
    }
    const updates = await readBoardUpdates(blackboardDatabaseName(options.name, userId, sessionId, life));
    return updates.length === 0 ? null : docOfUpdates(updates);
  };

  const destroy = async (userId: string, sessionId: string, life: string | undefined) => {
    if (life === undefined) return;
    await endLife(userId, sessionId, life, true);
    await deleteDocDatabase(blackboardDatabaseName(options.name, userId, sessionId, life));
  };

  if (lives) {
    lives.onmessage = (event: MessageEvent<unknown>) => {
      if (!isLifeEnded(event.data)) {
        options.onError(new TabulaError('schema/invalid', 'Ignored a malformed blackboard message from another tab (expected { v: 1, userId, sessionId, life }).'));
        return;
      }
      const { userId, sessionId, life } = event.data;
      endLife(userId, sessionId, life, false).catch((error: unknown) =>
        options.onError(new TabulaError('storage/failed', `Could not close the deleted blackboard of session "${sessionId}".`, { cause: error })),
      );
    };
  }

  return {
    acquire(userId, sessionId, life) {
      const k = key(userId, sessionId);
      const ek = entryKey(userId, sessionId, life);
      let entry = entries.get(ek);
      if (!entry) {
        entry = open(k, userId, sessionId, life);
        // Asked for a life this tab knows has ended: born closed, so its board refuses writes at once.
        if (life !== undefined && isEnded(k, life)) {
          shut(entry, 'delete').catch((error: unknown) => options.onError(new TabulaError('storage/failed', `Could not close the deleted blackboard of session "${sessionId}".`, { cause: error })));
        } else entries.set(ek, entry);
      }
      entry.refs += 1;
      const held = entry;
      let released = false;
      const lease = new AbortController();
      const assertOpen = () => {
        if (held.closedBy === 'delete') {
          throw new TabulaError(
            'session/not-found',
            `Session "${sessionId}" of user "${userId}" was deleted (here or in another tab), and its blackboard with it; open the session again with tabula.session() to start afresh.`,
          );
        }
        if (released || held.closedBy) throw new TabulaError('storage/closed', `The blackboard of session "${sessionId}" is closed; open the session again.`);
      };
      // Each lease gets its own view of the shared doc, so a closed session handle cannot write.
      const blackboard = createBlackboard({
        doc: held.doc,
        sourceOf: (origin) => (origin !== null && origin === held.provider ? 'tab' : origin === REMOTE_ORIGIN ? 'remote' : 'local'),
        whenLoaded: held.whenLoaded,
        flushed: async () => {
          await held.started;
          assertOpen();
          try {
            await held.persistence?.flushed();
          } catch (error) {
            // Deleted or closed while the barrier was on its way: say which, not a raw IndexedDB error.
            assertOpen();
            throw new TabulaError('storage/failed', `Could not make the blackboard of session "${sessionId}" durable.`, { cause: error });
          }
        },
        assertOpen,
        signal: lease.signal,
        onListenerError: (error) => options.onError(new TabulaError('argument/invalid', `A blackboard observe() listener of session "${sessionId}" threw; the change was applied and the other listeners were called.`, { cause: error })),
      });
      return {
        blackboard,
        async release() {
          if (released) return;
          released = true;
          lease.abort();
          held.refs -= 1;
          if (held.refs === 0) await shut(held, 'close');
        },
      };
    },
    destroy,
    async prune(userId, sessionId, keep) {
      const lives = new Set<string | undefined>(await boardLivesOnDisk(options.name, userId, sessionId));
      // A board this tab opened may not have reached the disk yet (undefined when none is open, or its life
      // is not known yet: destroy() of no life does nothing).
      for (const entry of entriesOf(userId, sessionId)) lives.add(entry.life);
      for (const life of lives) if (life !== keep) await destroy(userId, sessionId, life);
    },
    openLife: (userId, sessionId) => entriesOf(userId, sessionId).find((entry) => entry.life !== undefined)?.life,
    async boardSeen(userId, sessionId, life) {
      const doc = await contentOf(userId, sessionId, life);
      return boardSeenOf(doc ?? new Y.Doc());
    },
    async unseenKeys(userId, sessionId, life, seen) {
      const doc = await contentOf(userId, sessionId, life);
      return doc ? unseenBoardKeys(doc, seen) : [];
    },
    async close() {
      lives?.close();
      await Promise.all([...entries.values()].map((entry) => shut(entry, 'close')));
    },
  };
}
