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
import type { TabulaDb } from './db/schema.js';
import type { OutboxRow } from './db/rows.js';

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
  /** The clock the store orders writes by, which the engine corrects against the server's. */
  readonly clock: SyncClock;
  /**
   * The session rows this tab last saw committed (see known-rows.ts): a pulled page builds on them
   * (`applyOps({ known })`, checked in its transaction), and records the rows it leaves after it has
   * committed and published its change (publishing makes the store forget the rows it names).
   */
  readonly knownRows: KnownRows;
}

/**
 * The store's wall clock as sync sees it. Order keys are made from `wallMs() + offsetMs()`: the device's
 * clock corrected by what the engine measured against the server's (`X-Tabula-Time`), so a device whose
 * clock runs ahead or behind still orders its writes at about the server's time. The offset is the
 * user's: kept in meta (`syncNames.clockOffset`), read when the profile opens, so writes made offline
 * after a reload are corrected too.
 */
export interface SyncClock {
  /** The device's own clock, uncorrected, in ms since the epoch (`Date.now`). */
  wallMs(): number;
  /** The correction in effect, in ms: the server's clock minus the device's (0 until measured). */
  offsetMs(): number;
  /** Sets the correction for this Tabula's writes from now on (the engine stores it for the next open). */
  setOffsetMs(offsetMs: number): void;
  /**
   * Takes in the order key of an op pulled from the server: this Tabula's later writes are ordered after
   * it, in every session (an HLC receive), unless it is too far ahead to follow (see hlc.ts).
   */
  receive(order: string): void;
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

/**
 * An outbox item the server refused (an op over its size limit, one ordered too far ahead of its clock,
 * a board update over `maxUpdateBytes`): set aside so the items behind it still sync. It is kept, never
 * pushed again, until the app drops it with `tabula.sync.dropParked(id)`. What it wrote stays on this
 * device; other devices do not get it.
 */
export interface ParkedItem {
  /** Names it for `dropParked`. */
  readonly id: string;
  /** The seq it had in the outbox when it was set aside (the items behind it moved up one). */
  readonly seq: number;
  /** The op's kind, or `'board'` for a blackboard update. */
  readonly kind: OpKind | 'board';
  readonly sessionId: string;
  /** The id of the message a message op writes (`StoredMessage.id`), to show which one stayed on this device. */
  readonly messageId?: string;
  /** The server's refusal. */
  readonly reason: TabulaError;
}

/** The status of sync, as `tabula.sync.status()` reports it. */
export interface SyncStatus {
  readonly state: 'idle' | 'syncing' | 'offline' | 'error' | 'unauthorized';
  /** Local ops not yet acknowledged by the server (parked ones are not counted: they wait for no one). */
  readonly pending: number;
  /** When the last push-and-pull finished (ms since epoch), null before the first. */
  readonly lastSyncedAt: number | null;
  /** The last failure, while `state` is 'error', 'offline' or 'unauthorized'. */
  readonly error?: TabulaError;
  /** Items the server refused, set aside so that nothing behind them waits (see {@link ParkedItem}). */
  readonly parked: readonly ParkedItem[];
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
  /**
   * Forgets a parked item (see {@link ParkedItem}) for good: it leaves `status().parked`. What it wrote
   * stays on this device. Resolves to false when no parked item has that id.
   */
  dropParked(id: string): Promise<boolean>;
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
  /** The meta key of the epoch of the server the user's sync state is of (absent before the first answer that named one). */
  epoch: (userId: string) => `sync:epoch:${JSON.stringify([userId])}`,
  /** The meta key of the user's clock correction, in ms (see {@link SyncClock}). */
  clockOffset: (userId: string) => `sync:clockOffset:${JSON.stringify([userId])}`,
  /** The meta key of the last clock correction measured on this profile, by any user: a user's first open here starts from it. */
  profileClockOffset: 'sync:clockOffset',
  /** The meta key of the user's parked items (see {@link ParkedItem}), with their outbox rows. */
  parked: (userId: string) => `sync:parked:${JSON.stringify([userId])}`,
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

/**
 * The largest op a synced write may make, in bytes of its JSON (UTF-8): the sync server's default
 * `maxBodyBytes` (1 MiB) less the push's envelope (`maxOpBytes(DEFAULT_SYNC_LIMITS)` in the protocol;
 * a test holds the two equal). Larger would be refused by the server on every push; the store refuses
 * it when it is written instead (`sync/too-large`), and nothing of that write lands.
 */
export const MAX_OP_BYTES = 1024 * 1024 - 4096;

/** What any tab posts on a user's sync channel after it queued rows of that user: the leader pushes them (and recounts). */
export const SYNC_NUDGE = { v: 1, kind: 'nudge' } as const;
