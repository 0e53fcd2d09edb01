/**
 * What a session handle, and every module it composes (runs, streams, memory,
 * notes, sync), shares with the Tabula that opened it: the database, the
 * clock, the change feed, the locks, the boards and the bookkeeping of what is
 * in flight. One `openTabula()` builds one; nothing here is module state, so
 * two Tabulas in one page share nothing. It holds no write logic (writer.ts
 * does) and opens nothing itself.
 */
import { TabulaError } from '../core/errors.js';
import type { HybridLogicalClock } from '../core/hlc.js';
import type { TokenCounter } from '../core/tokens.js';
import type { BoardRegistry } from '../blackboard/registry.js';
import type { ChangeFeed } from './changes.js';
import type { RunCoordinator } from './coordinator.js';
import type { KnownRows } from './known-rows.js';
import type { TabulaDb } from './db/schema.js';
import type { OutboxRow } from './db/rows.js';

/** Everything a session handle needs from the Tabula that opened it. */
export interface StoreContext {
  readonly db: TabulaDb;
  readonly name: string;
  /** Orders this tab's writes: its wall clock is {@link StoreContext.now}. */
  readonly clock: HybridLogicalClock;
  /** The device's clock as sync corrected it (ms since the epoch): what the store stamps writes with. */
  now(): number;
  readonly feed: ChangeFeed;
  readonly tokenCounter: TokenCounter;
  readonly defaultUserId: string;
  readonly onError: (error: TabulaError) => void;
  /** Run and stream locks, and interrupts across tabs. */
  readonly coordinator: RunCoordinator;
  /** The live blackboard docs of this tab's open sessions. */
  readonly boards: BoardRegistry;
  /** Writes left running in the background (token caches); close() waits for them. */
  readonly background: Set<Promise<unknown>>;
  /** The runs in flight in this tab, by run lock name, to refuse a run nested in one of them. */
  readonly activeRuns: Map<string, ActiveRun>;
  /** Streams not yet finished; close() interrupts them so their locks are released. */
  readonly openStreams: Set<{ abort(): Promise<unknown> }>;
  /** The session rows this Tabula last saw committed, on which appends build (see commit). */
  readonly knownRows: KnownRows;
  /**
   * Sync as writes see it: `userId` is the user this Tabula's sync engine runs for (null with sync off),
   * whose writes are always queued; a user who has synced on this profile before has theirs queued too,
   * with sync on or off (see `syncNames` in replication/keys.ts). `nudge` hears of the rows a write queued, for the
   * engine of their user in this tab or another.
   */
  sync?: { readonly userId: string | null; nudge(userId: string, queued: readonly OutboxRow[]): void };
  closed: boolean;
}

/** A run in flight in this tab (see runs.ts). */
export interface ActiveRun {
  /** The name of the function that calls the run's fn: it shows in the async stack of code fn awaits. */
  readonly marker: string;
  /** True while fn's synchronous part runs. */
  synchronous: boolean;
}

/** Throws `storage/closed` once the Tabula of `store` is closed: every read and write checks it first. */
export function assertOpen(store: StoreContext): void {
  if (store.closed) {
    throw new TabulaError('storage/closed', `Tabula "${store.name}" is closed; open it again with openTabula().`);
  }
}
