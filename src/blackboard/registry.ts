/**
 * One live Y.Doc per open session in this tab, shared by every handle of
 * that session (so two handles see each other's writes at once), with its
 * IndexedDB persistence and its cross-tab provider. Reference-counted:
 * the last handle to close closes the doc, the provider and the channel.
 */
import * as Y from 'yjs';
import { TabulaError } from '../core/errors.js';
import { createBlackboard, type Blackboard, type ChangeSource } from './blackboard.js';
import { deleteDocDatabase, persistDoc, type DocPersistence } from './persistence.js';
import { TabSyncProvider, broadcastTransport, type TabTransport } from './tab-provider.js';

/** The transaction origin the sync client uses for changes from the server. */
export const REMOTE_ORIGIN: unique symbol = Symbol('tabula.remote');

export interface BoardLease {
  readonly blackboard: Blackboard;
  /** Gives the lease back; the last one closes the doc. */
  release(): Promise<void>;
}

export interface BoardRegistry {
  acquire(userId: string, sessionId: string): BoardLease;
  /** Closes the session's doc here and deletes its database. */
  destroy(userId: string, sessionId: string): Promise<void>;
  close(): Promise<void>;
}

export interface BoardRegistryOptions {
  /** The Tabula database name; blackboard databases are named after it. */
  name: string;
  /** This tab's id in cross-tab frames. */
  peerId: string;
  onError: (error: TabulaError) => void;
  /** @default a BroadcastChannel per session */
  transport?: (channelName: string) => TabTransport;
  /** @default 10_000 */
  resyncIntervalMs?: number;
}

interface Entry {
  refs: number;
  closed: boolean;
  doc: Y.Doc;
  persistence: DocPersistence;
  provider: TabSyncProvider;
  sourceOf: (origin: unknown) => ChangeSource;
}

/** `${name}:${userId}:${sessionId}:blackboard`, each part URI-encoded so ids with ':' cannot collide. */
export function blackboardDatabaseName(name: string, userId: string, sessionId: string): string {
  return [name, userId, sessionId].map(encodeURIComponent).join(':') + ':blackboard';
}

export function createBoardRegistry(options: BoardRegistryOptions): BoardRegistry {
  const entries = new Map<string, Entry>();
  const key = (userId: string, sessionId: string) => JSON.stringify([userId, sessionId]);
  const transport = options.transport ?? broadcastTransport;

  const open = (userId: string, sessionId: string): Entry => {
    const doc = new Y.Doc();
    // The provider subscribes to updates first, so a change is on its way to the other tabs
    // before y-indexeddb starts its IndexedDB transaction for it.
    const provider = new TabSyncProvider(doc, {
      peerId: options.peerId,
      transport: transport(`tabula:${options.name}:blackboard:${key(userId, sessionId)}`),
      onError: options.onError,
      ...(options.resyncIntervalMs === undefined ? {} : { resyncIntervalMs: options.resyncIntervalMs }),
    });
    const persistence = persistDoc(blackboardDatabaseName(options.name, userId, sessionId), doc, { onError: options.onError });
    const sourceOf = (origin: unknown): ChangeSource => (origin === provider ? 'tab' : origin === REMOTE_ORIGIN ? 'remote' : 'local');
    provider.resync();
    return { refs: 0, closed: false, doc, persistence, provider, sourceOf };
  };

  const shut = async (k: string, entry: Entry) => {
    if (entry.closed) return;
    entry.closed = true;
    entries.delete(k);
    entry.provider.close();
    await entry.persistence.close();
    entry.doc.destroy();
  };

  return {
    acquire(userId, sessionId) {
      const k = key(userId, sessionId);
      let entry = entries.get(k);
      if (!entry) entries.set(k, (entry = open(userId, sessionId)));
      entry.refs += 1;
      const held = entry;
      let released = false;
      // Each lease gets its own view of the shared doc, so a closed session handle cannot write.
      const blackboard = createBlackboard({
        doc: held.doc,
        sourceOf: held.sourceOf,
        whenLoaded: held.persistence.whenLoaded,
        flushed: () => held.persistence.flushed(),
        assertOpen: () => {
          if (released || held.closed) throw new TabulaError('storage/closed', `The blackboard of session "${sessionId}" is closed; open the session again.`);
        },
      });
      return {
        blackboard,
        async release() {
          if (released) return;
          released = true;
          held.refs -= 1;
          if (held.refs === 0) await shut(k, held);
        },
      };
    },
    async destroy(userId, sessionId) {
      const k = key(userId, sessionId);
      const entry = entries.get(k);
      if (entry) await shut(k, entry);
      await deleteDocDatabase(blackboardDatabaseName(options.name, userId, sessionId));
    },
    async close() {
      await Promise.all([...entries].map(([k, entry]) => shut(k, entry)));
    },
  };
}
