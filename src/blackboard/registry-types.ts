/**
 * The board registry's contract: the leases it hands out, what it does with a session's board lives,
 * and what it is built from. registry.ts implements it.
 */
import type { TabulaError } from '../core/errors.js';
import type { Blackboard } from './blackboard.js';
import type { TabTransport } from './tab-provider.js';

/** A hold on one session's board: the board stays open until every lease on it is released. */
export interface BoardLease {
  readonly blackboard: Blackboard;
  /** Gives the lease back; the last one closes the doc. */
  release(): Promise<void>;
}

/** The live boards of one Tabula in this tab, one doc per session life, shared by every handle. */
export interface BoardRegistry {
  /**
   * A lease on the session's board. With `life`, the board of that life only: once it has ended (known
   * here, or found when the board opens), the board refuses writes with `session/not-found`. Without,
   * the board of the session's current life.
   */
  acquire(userId: string, sessionId: string, life?: string): BoardLease;
  /**
   * Ends life `life` of the session: closes its doc here, tells every other
   * tab to close theirs, and deletes its database. Without a life (the
   * session did not exist) nothing is open to close.
   */
  destroy(userId: string, sessionId: string, life: string | undefined): Promise<void>;
  /**
   * Ends every life of the session's board but `keep` (its current life,
   * undefined when the session is gone), as {@link destroy} would: for a
   * delete that came from another device, which names no life of this
   * replica.
   */
  prune(userId: string, sessionId: string, keep: string | undefined): Promise<void>;
  /**
   * The life of the session's board open in this tab, once known; undefined when none is open. A board
   * whose life has ended stays open until that end reaches this tab, and `acquire` hands it out meanwhile.
   */
  openLife(userId: string, sessionId: string): string | undefined;
  /**
   * What this replica has of life `life` of the session's board: the base64 Yjs state vector of its
   * content (open in this tab, or stored), at most `BOARD_SEEN_MAX` characters (see seen.ts); that of an
   * empty doc when nothing is stored. For a session.delete's `board`.
   */
  boardSeen(userId: string, sessionId: string, life: string): Promise<string>;
  /**
   * The keys of life `life` of the session's board here whose value was written by an item beyond `seen`
   * (a {@link boardSeen} of another replica), sorted; none when nothing is stored. Read before the life's
   * board is deleted: what a delete drops of a board that its deleter never saw.
   */
  unseenKeys(userId: string, sessionId: string, life: string, seen: string): Promise<string[]>;
  /** Closes every board this registry opened, waiting for their writes to be stored. */
  close(): Promise<void>;
}

/** What `createBoardRegistry` (registry.ts) is built from. */
export interface BoardRegistryOptions {
  /** The Tabula database name; blackboard databases are named after it. */
  name: string;
  /** This tab's id in cross-tab frames. */
  peerId: string;
  onError: (error: TabulaError) => void;
  /**
   * The id of the session's current life, or undefined when it does not
   * exist. Each life has its own id; ids are compared for equality only
   * (a later life's id may sort before an earlier one's).
   * @default every session has one life, ''
   */
  lifeOf?: (userId: string, sessionId: string) => Promise<string | undefined>;
  /** @default a BroadcastChannel per session */
  transport?: (channelName: string) => TabTransport;
  /** @default 10_000 */
  resyncIntervalMs?: number;
  /**
   * Called once a change made in this tab (not one from another tab, the
   * sync server or the database) is stored, so the sync client never reads
   * the database before the change is in it. Changes made meanwhile are
   * covered by one call.
   */
  onLocalUpdate?: (userId: string, sessionId: string) => void;
}

