/**
 * The contract between the store and a sync engine (`httpSync` in
 * `tabula-sdk/sync`), and the only module of the store that `src/sync/`
 * imports (ESLint holds it to that). The engine moves bytes and elects a
 * leader; the store decides what the bytes mean. So the engine gets a
 * {@link SyncHost} (names, locks, the clock, where to report) and, through
 * {@link openReplica}, the store's half of sync for one user: a
 * {@link Replica}, whose methods are all the engine ever does to the data.
 * It never sees the database. The store never imports the engine; the app
 * passes one to `openTabula({ sync })`, and the replication code comes into
 * a bundle with the engine, not with `openTabula`.
 */
import type { TabulaError } from '../../core/errors.js';
import type { Op, OpKind } from '../../core/ops.js';
import type { Locks } from '../locks.js';
import type { OutboxRow } from '../db/rows.js';
import { createReplica, type ReplicaSource } from './replica.js';

/** The store's half of sync for one user, as the engine uses it (every method reports store failures as TabulaErrors). */
export interface Replica {
  /** The client id the user's pushes from this profile carry, made and stored on first use; the stored one again after a reseed. */
  clientId(): Promise<string>;
  /** The user's pull cursor; null before the first page (a pull from the start). */
  cursor(): Promise<string | null>;
  /** The epoch of the server the user's state is of, as stored; null before an answer named one. */
  epoch(): Promise<string | null>;
  /** Records `epoch` as the one the user's state is of (the first an answer named). */
  setEpoch(epoch: string): Promise<void>;
  /** What waits: the outbox rows not yet acknowledged, and the parked items. */
  waiting(): Promise<{ pending: number; parked: ParkedItem[] }>;
  /** Rows this tab's writes just queued, so that the next {@link take} may send them without reading them back. */
  hand(rows: readonly OutboxRow[]): void;
  /** The next outbox items to push, in seq order, at most `maxItems` and (after the first) `maxBytes` of JSON. */
  take(limits: { readonly maxItems: number; readonly maxBytes: number }): Promise<OutboxItem[]>;
  /** The server holds every item up to `lastSeq`: they leave the outbox. */
  acknowledge(lastSeq: number): Promise<void>;
  /** Sets aside an item the server refused on its own (see {@link ParkedItem}); null when it was no longer queued. */
  park(item: OutboxItem, refusal: TabulaError): Promise<ParkedItem | null>;
  /** Forgets a parked item; false when none has that id. */
  dropParked(id: string): Promise<boolean>;
  /** Queues what the user's boards hold beyond what was queued of them before. */
  queueBoards(): Promise<void>;
  /** Applies a page of the user's items and moves the cursor to `page.cursor` (see {@link PageOutcome} for `from`). */
  applyPage(page: PulledPage, from?: { readonly after: string | null }): Promise<PageOutcome>;
  /** Starts the user's sync state over for a server that lost it; false when another tab already had. */
  reseed(epoch: string | null): Promise<boolean>;
  /** Calls `listener` when a change made to one of the user's boards, in any tab, is stored; returns the remover. */
  onBoardChange(listener: () => void): () => void;
}

/** An outbox item as pushed: an op or a board update, with its seq in the user's numbering. */
export type OutboxItem =
  | { readonly seq: number; readonly op: Op }
  | { readonly seq: number; readonly board: { readonly sessionId: string; readonly update: string; readonly after?: string } };

/** An item of the user's log as the server sends it: whose push it was, and the op or board update. */
export type PulledItem =
  | { readonly clientId: string | null; readonly op: Op }
  | { readonly clientId: string | null; readonly board: { readonly sessionId: string; readonly update: string; readonly after?: string | undefined } };

/** A page of pulled (or poked) items, validated by the engine against the wire protocol, and the cursor past it. */
export interface PulledPage {
  readonly items: readonly PulledItem[];
  readonly cursor: string | null;
}

/**
 * What became of a page: 'applied'; with `from` (the cursor a pull asked from, or a poke's `after`),
 * 'current' when the stored cursor is already the page's, 'stale' when it is neither `from.after` nor
 * that (the items do not continue it, or another tab started the user's state over): nothing applied.
 */
export type PageOutcome = 'applied' | 'current' | 'stale';

/** What the store gives a sync engine when it opens. */
export interface SyncHost {
  /** The database name, for messages. */
  readonly name: string;
  /** The user whose ops sync (the Tabula's `userId`); ops of other local users stay local. */
  readonly userId: string;
  /** The user's sync leader lock and tab channel on this profile (see keys.ts). */
  readonly leaderLock: string;
  readonly channel: string;
  /** Web Locks, or the in-process manager where they are missing. */
  readonly locks: Locks;
  readonly onError: (error: TabulaError) => void;
  /** The clock the store orders writes by, which the engine corrects against the server's. */
  readonly clock: SyncClock;
  /** The store's side, opaque to the engine: {@link openReplica} opens it. */
  readonly replication: ReplicationHandle;
}

declare const replicationBrand: unique symbol;
/**
 * The store's side of one user's sync, as the engine holds it: something to pass to {@link openReplica},
 * nothing more (host.ts makes it; the store imports no value of this module, so that the replication code
 * stays out of a bundle without sync).
 */
export interface ReplicationHandle {
  readonly [replicationBrand]: true;
}

/**
 * The store's half of sync for the host's user (the engine's half of the handover); one per engine.
 * `maxPushItems` is the most items one push takes (rows handed over beyond it are read back instead).
 */
export function openReplica(host: SyncHost, options: { readonly maxPushItems: number }): Replica {
  return createReplica(host.replication as unknown as ReplicaSource, options.maxPushItems);
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
  /** Sets the correction for this Tabula's writes from now on (the leader tab's, as it told this one). */
  setOffsetMs(offsetMs: number): void;
  /** Sets the correction the engine measured, and stores it for the next open (not awaited: the next write is ordered by it at once). */
  measuredOffsetMs(offsetMs: number): void;
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
  /** The session the item belongs to. */
  readonly sessionId: string;
  /** The id of the message a message op writes (`StoredMessage.id`), to show which one stayed on this device. */
  readonly messageId?: string;
  /** The server's refusal. */
  readonly reason: TabulaError;
}

/** The status of sync, as `tabula.sync.status()` reports it. */
export interface SyncStatus {
  /**
   * `'syncing'` while a push-and-pull runs, `'idle'` between them; `'offline'` when the server is
   * unreachable or asked to retry later, and `'error'` when a cycle failed otherwise (both retry by
   * themselves, with backoff); `'unauthorized'` when the token was refused, until one is accepted (the
   * event stream keeps asking for one, as `resume()` and `flush()` do).
   */
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
  /** The status now, the same in every tab that syncs this user (the leader tab's); `subscribe()` follows it. */
  status(): SyncStatus;
  /** Calls `listener` on every status change; returns the unsubscribe function. */
  subscribe(listener: (status: SyncStatus) => void): () => void;
  /** Pushes everything pending, then pulls until caught up; rejects with a TabulaError if it cannot. */
  flush(): Promise<void>;
  /** Stops syncing in the background until resume(); local writes keep queueing. */
  pause(): void;
  /** Restarts background sync after `pause()` and syncs at once; after `'unauthorized'` it asks for a token again. */
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
   * committed, so that the leader may push them without reading them back (see {@link Replica.hand}).
   */
  nudge(queued?: readonly OutboxRow[]): void;
  close(): Promise<void>;
}

/**
 * What `openTabula({ sync })` takes: `httpSync(...)` returns one. Opaque to the app: its one method is
 * the store's handshake with Tabula's own engine, internal and free to change between releases.
 */
export interface SyncAdapter {
  /**
   * Starts the engine for the Tabula `host` describes; `openTabula()` calls it once, and `tabula.close()`
   * closes the engine. Internal, like SyncHost and SyncEngine: they change with the store.
   * @internal
   */
  start(host: SyncHost): SyncEngine;
}

export { SYNC_NUDGE } from './keys.js';
