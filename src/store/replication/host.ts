/**
 * The store's side of the handover to a sync engine, as `openTabula` makes
 * it: the corrected clock the store orders writes by (and the offset kept
 * in meta for the next open), the first seed of a user's outbox, the
 * {@link SyncHost} the engine starts with, and how a write's queued rows
 * reach the engine of their user, in this tab or another. It imports no
 * replication code (contract.ts types only), so a Tabula without sync
 * bundles none: the engine opens the replica itself (`openReplica`).
 */
import { createBoardNotices, type BoardNotices } from '../board-notices.js';
import { platformLocks } from '../locks.js';
import type { TabulaDb } from '../db/schema.js';
import type { StoreContext } from '../context.js';
import type { ReplicationHandle, SyncAdapter, SyncEngine, SyncHost } from './contract.js';
import { SYNC_NUDGE, syncNames } from './keys.js';
import type { ReplicaSource } from './replica.js';
import { seedOutbox } from './seed.js';

/** The device's clock as sync corrects it: what the store stamps and orders writes by. */
export interface CorrectedClock {
  /** The device's own clock, uncorrected, in ms since the epoch. */
  wallMs(): number;
  /** The correction in effect, in ms (the server's clock minus the device's; 0 until measured). */
  offsetMs(): number;
  setOffsetMs(offsetMs: number): void;
  /** `wallMs() + offsetMs()`. */
  now(): number;
}

/**
 * The store's corrected clock over `wallClock` (the device's clock as it is when the Tabula opens: a test
 * injects a skewed one by replacing Date.now meanwhile).
 */
export function correctedClock(wallClock: () => number): CorrectedClock {
  /** Server time minus device time, as sync last measured it for this Tabula's user. */
  let offsetMs = 0;
  return {
    wallMs: () => wallClock(),
    offsetMs: () => offsetMs,
    setOffsetMs(next) {
      if (Number.isFinite(next)) offsetMs = next;
    },
    now: () => wallClock() + offsetMs,
  };
}

/**
 * The clock correction to start from for `userId`: the user's own, or what another user measured on this
 * profile (the device's clock is the same; the server usually too); undefined when none was measured.
 */
export async function storedClockOffset(db: TabulaDb, userId: string): Promise<number | undefined> {
  const offsets = (await db.meta.bulkGet([syncNames.clockOffset(userId), syncNames.profileClockOffset])).map((row) => row?.value);
  return offsets.find((value): value is number => typeof value === 'number' && Number.isFinite(value));
}

/** The store's link to the sync engines of its users, in this tab and the others. */
export interface SyncLink {
  /** The store's `sync`, as writes see it. */
  readonly sync: NonNullable<StoreContext['sync']>;
  /** A change to a board made in this tab is stored: the sync leader of its user, in whichever tab it runs, hears of it. */
  boardChanged(userId: string, sessionId: string): void;
  /** Queues the user's existing data once (the first seed) and marks this tab's clock as one of the profile's. */
  seed(): Promise<void>;
  /** Starts the engine of the user (after {@link SyncLink.seed}). */
  start(adapter: SyncAdapter, clock: CorrectedClock): SyncEngine;
  /** Closes the channels the link opened. */
  close(): void;
}

/** The link between the store of `store.name` and the sync engines of its users; `userId` syncs in this tab when `syncing`. */
export function createSyncLink(store: StoreContext, userId: string, syncing: boolean): SyncLink {
  const { db, name } = store;
  let engine: SyncEngine | null = null;
  /** Channels to other tabs' sync engines, by user, opened on the first write of that user that queued rows. */
  const channels = new Map<string, BroadcastChannel>();
  // A tab without sync opens the board notices' channel on its first board change.
  let notices: BoardNotices | null = syncing ? createBoardNotices(name, store.onError) : null;
  /** Set as the link closes: a board change stored after that (its flush outlived the registry) is announced by no one. */
  let closed = false;
  return {
    sync: {
      userId: syncing ? userId : null,
      nudge(user, queued) {
        if (engine && user === userId) return engine.nudge(queued);
        // Rows of a user whose engine runs elsewhere (a tab without sync writing for a user who syncs here): their leader pushes them.
        if (typeof BroadcastChannel !== 'function') return;
        let channel = channels.get(user);
        if (!channel) channels.set(user, (channel = new BroadcastChannel(syncNames.channel(name, user))));
        channel.postMessage(SYNC_NUDGE);
      },
    },
    boardChanged(user, sessionId) {
      // A closed channel throws on postMessage, and one opened now would never be closed; the next leader's first look finds the change.
      if (!closed) (notices ??= createBoardNotices(name, store.onError)).announce(user, sessionId);
    },
    async seed() {
      await seedOutbox(db, userId);
    },
    start(adapter, clock) {
      notices ??= createBoardNotices(name, store.onError);
      const source: ReplicaSource = { store, userId, notices };
      const host: SyncHost = {
        name,
        userId,
        leaderLock: syncNames.leaderLock(name, userId),
        channel: syncNames.channel(name, userId),
        locks: platformLocks(),
        onError: store.onError,
        clock: {
          wallMs: () => clock.wallMs(),
          offsetMs: () => clock.offsetMs(),
          setOffsetMs: (offsetMs) => clock.setOffsetMs(offsetMs),
          measuredOffsetMs(offsetMs) {
            clock.setOffsetMs(offsetMs);
            // Not awaited: the next write is ordered by it at once; a reload finds it once it is stored.
            void db.meta
              .bulkPut([
                { key: syncNames.clockOffset(userId), value: offsetMs },
                { key: syncNames.profileClockOffset, value: offsetMs },
              ])
              .catch(() => undefined);
          },
        },
        // Opaque to the engine (see ReplicationHandle): only openReplica reads it back.
        replication: source as unknown as ReplicationHandle,
      };
      engine = adapter.start(host);
      return engine;
    },
    close() {
      closed = true;
      notices?.close();
      for (const channel of channels.values()) channel.close();
    },
  };
}
