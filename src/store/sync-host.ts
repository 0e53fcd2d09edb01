/**
 * The contract between the store and a sync engine (`httpSync` in
 * `tabula-sdk/sync`): what the store lends the engine, and what the engine
 * hands back as `tabula.sync`. The store never imports the engine; the app
 * passes one to `openTabula({ sync })`.
 */
import type * as Y from 'yjs';
import type { TabulaError } from '../core/errors.js';
import type { OpKind } from '../core/ops.js';
import type { DroppedWorkInfo, SaveConflictInfo } from './changes.js';
import type { KnownRows } from './known-rows.js';
import type { Locks } from './locks.js';
import type { OutboxRow, TabulaDb } from './schema.js';

/** What the store gives a sync engine when it opens. */
export interface SyncHost {
  /** The database; ops are applied with `applyOps` in one transaction over `sessionTables(db)`. */
  readonly db: TabulaDb;
  /** The database name (names the sync leader lock). */
  readonly name: string;
  /** The user whose ops sync (the Tabula's `userId`); ops of other local users stay local. */
  readonly userId: string;
  /** Web Locks, or the in-process manager where they are missing. */
  readonly locks: Locks;
  readonly onError: (error: TabulaError) => void;
  /** Announces sessions changed by pulled ops, to this tab and the others (origin 'remote'). */
  publish(changes: readonly { userId: string; sessionId: string; kinds: readonly OpKind[]; conflict?: SaveConflictInfo; dropped?: DroppedWorkInfo }[]): void;
  /** True when an order key was made by a clock of this profile (a save made here). */
  isLocalOrder(order: string): Promise<boolean>;
  /** The user's blackboards. */
  readonly boards: SyncBoards;
  /**
   * The session rows this tab last saw committed (see known-rows.ts): a pulled page builds on them
   * (`applyOps({ known })`, checked in its transaction), and records the rows it leaves after it has
   * committed and published its change (publishing makes the store forget the rows it names).
   */
  readonly knownRows: KnownRows;
}

/** The user's blackboards, as the sync engine reads and writes them. */
export interface SyncBoards {
  /** The user's sessions whose blackboard may hold something (the engine looks at each when it starts leading). */
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

/** The status of sync, as `tabula.sync.status()` reports it. */
export interface SyncStatus {
  readonly state: 'idle' | 'syncing' | 'offline' | 'error' | 'unauthorized';
  /** Local ops not yet acknowledged by the server. */
  readonly pending: number;
  /** When the last push-and-pull finished (ms since epoch), null before the first. */
  readonly lastSyncedAt: number | null;
  /** The last failure, while `state` is 'error', 'offline' or 'unauthorized'. */
  readonly error?: TabulaError;
}

/** `tabula.sync`: controls and watches the sync engine. */
export interface SyncHandle {
  status(): SyncStatus;
  /** Calls `listener` on every status change; returns the unsubscribe function. */
  subscribe(listener: (status: SyncStatus) => void): () => void;
  /** Pushes everything pending, then pulls until caught up; rejects with a TabulaError if it cannot. */
  flush(): Promise<void>;
  /** Stops syncing in the background until resume(); local writes keep queueing. */
  pause(): void;
  resume(): void;
}

/** A running engine: the handle plus what the store calls. */
export interface SyncEngine extends SyncHandle {
  /**
   * A local write queued outbox rows: push soon. `queued`, when given, are the rows this tab's write
   * committed, so that the leader may push them without reading them back (see httpSync's push).
   */
  nudge(queued?: readonly OutboxRow[]): void;
  close(): Promise<void>;
}

/** What `openTabula({ sync })` takes: `httpSync(...)` returns one. */
export interface SyncAdapter {
  start(host: SyncHost): SyncEngine;
}

/**
 * The names of one user's sync state on a profile. Everything sync keeps is per (profile, user): the
 * cursor into the user's log on the server, the seq counter and client id the server numbers the user's
 * pushes by, the outbox rows (each names its user) and the leader lock and tab channel, so two users
 * taking turns on one browser profile (or signed in in two tabs of it) never push, pull or count each
 * other's data. The seq counter's row also marks the user as one who has synced on this profile: from
 * then on every write of the user is queued, with sync on or off (see writer.ts).
 */
export const syncNames = {
  /** The meta key of the user's last outbox seq (0 before the first row); absent while the user has never synced here. */
  seq: (userId: string) => `sync:seq:${JSON.stringify([userId])}`,
  /** The meta key of the user's pull cursor (absent: pull from the start). */
  cursor: (userId: string) => `sync:cursor:${JSON.stringify([userId])}`,
  /** The meta key of the client id the user's pushes from this profile carry. */
  clientId: (userId: string) => `sync:clientId:${JSON.stringify([userId])}`,
  /** The meta key that marks the user's existing data as queued (the first sync's seed); the name earlier versions wrote. */
  seeded: (userId: string) => `sync:seeded:${userId}`,
  /** The Web Lock of the user's sync leader on profile `name`. */
  leaderLock: (name: string, userId: string) => `tabula:${name}:sync-leader:${JSON.stringify([userId])}`,
  /** The BroadcastChannel of the user's sync engines on profile `name` (status, nudges). */
  channel: (name: string, userId: string) => `tabula:${name}:sync:${JSON.stringify([userId])}`,
} as const;

/**
 * The meta keys of the one sync state a profile had before it was kept per user (schema version 4 and
 * earlier): the upgrade gives it to the user it belonged to (see schema.ts).
 */
export const LEGACY_SYNC_KEYS = { seq: 'sync:seq', cursor: 'sync:cursor', clientId: 'sync:clientId' } as const;

/** The prefix of the meta keys that record, per board life, what the sync leader has queued of it (src/sync/boards.ts). */
export const BOARD_QUEUED_PREFIX = 'sync:board:';

/** What any tab posts on a user's sync channel after it queued rows of that user: the leader pushes them (and recounts). */
export const SYNC_NUDGE = { v: 1, kind: 'nudge' } as const;
