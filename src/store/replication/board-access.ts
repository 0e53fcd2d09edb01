/**
 * The user's blackboards as replication reaches them: which sessions may
 * hold a board, opening one board for the session's current life (never a
 * board of a life that ended), hearing of board changes stored in any tab,
 * and the queue of boards that may hold something not yet in the outbox.
 * What a board's change becomes in the outbox is boards.ts's.
 */
import type * as Y from 'yjs';
import { blackboardDatabaseName } from '../../blackboard/lives.js';
import type { BoardNotices } from '../board-notices.js';
import { lifeOf } from '../db/rows.js';
import { userSessionRows } from '../db/schema.js';
import type { StoreContext } from '../context.js';
import { queueBoard } from './boards.js';

/** The user's blackboards, as replication reads and writes them. */
export interface SyncBoards {
  /** The user's sessions whose blackboard may hold something (all of them are looked at when queueing starts). */
  sessions(): Promise<string[]>;
  /** Opens the board of the session's current life here; null when the session does not exist here. */
  open(sessionId: string): Promise<SyncBoard | null>;
  /** Calls `listener` when a change made to a board in any tab of this profile is stored. */
  onLocalChange(listener: (sessionId: string) => void): () => void;
}

/** One open blackboard: its loaded doc, shared with the tab's session handles. */
export interface SyncBoard {
  readonly doc: Y.Doc;
  /** The session life the board belongs to, as its ops name it (`Op.after`); absent for a session created before lives were named. */
  readonly after?: string;
  /** Resolves once every change applied so far is stored. */
  flushed(): Promise<void>;
  release(): Promise<void>;
}

/** Replication's access to the blackboards of `userId` (see {@link SyncBoards}). */
export function syncBoards(store: StoreContext, userId: string, notices: BoardNotices): SyncBoards {
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
      const lease = store.boards.acquire(userId, sessionId, lifeOf(row));
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

/** The boards of one user that may hold something not queued yet, and their queueing. */
export interface BoardQueue {
  /** Queues the boards that changed since they were last queued (each board's snapshot decides). */
  queue(): Promise<void>;
  /** Calls `listener` on every board change stored in any tab (the board is marked to be queued first); returns the remover. */
  onChange(listener: () => void): () => void;
  /** Looks at every board again at the next queue(): their queued snapshots went (the user's state started over). */
  rescan(): void;
}

/** The board queue of `userId`. */
export function createBoardQueue(store: StoreContext, userId: string, boards: SyncBoards): BoardQueue {
  /** Sessions whose board may hold something not queued yet. */
  const dirty = new Set<string>();
  let scanned = false;
  return {
    async queue() {
      // The first time, look at every board: a change whose notice was lost (its tab crashed) is found here.
      if (!scanned) {
        for (const sessionId of await boards.sessions()) dirty.add(sessionId);
        scanned = true;
      }
      for (const sessionId of [...dirty]) {
        dirty.delete(sessionId);
        const board = await boards.open(sessionId);
        if (!board) continue;
        try {
          await queueBoard(store.db, userId, sessionId, board);
        } catch (error) {
          dirty.add(sessionId);
          throw error;
        } finally {
          await board.release();
        }
      }
    },
    onChange(listener) {
      return boards.onLocalChange((sessionId) => {
        dirty.add(sessionId);
        listener();
      });
    },
    rescan() {
      scanned = false;
    },
  };
}
