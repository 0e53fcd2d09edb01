/**
 * What every answer of the sync server says besides its body (protocol
 * SYNC_HEADERS): its time, which corrects the store's clock, and its
 * store's epoch, which says whether the server still holds what this
 * user's state was synced with. It decides; the store keeps the offset and
 * the epoch (through the host's clock and the replica).
 */
import { TabulaError } from '../core/errors.js';
import type { Replica, SyncClock } from '../store/replication/contract.js';
import { ServerReset } from './http.js';
import { EPOCH, SYNC_HEADERS } from './protocol.js';

/**
 * How far a measured clock offset may stray from the one in effect, beyond the measurement's own
 * uncertainty (half the round trip), before it replaces it: jitter does not rewrite the offset, a
 * clock that was set or drifted does.
 */
const OFFSET_TOLERANCE_MS = 1000;

/** The server's time and epoch as this engine follows them. */
export interface ServerWatch {
  /**
   * Reads the server's time and epoch off an answer's headers. Throws {@link ServerReset} when the epoch
   * is not the one this user's state is of; the first epoch an answer names is taken as the state's.
   */
  observe(headers: Headers, sentAt: number, receivedAt: number): Promise<void>;
  /**
   * Takes in one measurement of the server's clock (its time when it answered, `sentAt` and
   * `receivedAt` on the device's clock): when it says the offset in effect is off by more than it
   * can tell, the store's writes are ordered by the new one from now on, here, in the other tabs, and
   * after a reload.
   */
  correctClock(serverMs: number, sentAt: number, receivedAt: number): void;
  /** The epoch of the server this user's state is of: null before an answer named one, undefined until read. */
  epoch(): string | null | undefined;
  /** The user's state started over: the stored epoch is the one from now on, and the one left behind is retired. */
  restarted(): Promise<void>;
}

/** The watch over the answers of the server `replica` syncs with; `onOffset` hears of a new clock offset. */
export function createServerWatch(clock: SyncClock, replica: Replica, onOffset: () => void): ServerWatch {
  let epoch: string | null | undefined;
  /**
   * Epochs this engine has left behind: an answer naming one is an old answer that arrived late (a slow
   * connection, a retry), not a server that lost its data again.
   */
  const retired = new Set<string>();

  const correctClock = (serverMs: number, sentAt: number, receivedAt: number): void => {
    const sample = serverMs - (sentAt + receivedAt) / 2;
    const uncertainty = Math.abs(receivedAt - sentAt) / 2;
    if (!Number.isFinite(sample) || Math.abs(sample - clock.offsetMs()) <= uncertainty + OFFSET_TOLERANCE_MS) return;
    clock.measuredOffsetMs(Math.round(sample));
    onOffset();
  };

  return {
    async observe(headers, sentAt, receivedAt) {
      const time = headers.get(SYNC_HEADERS.time);
      if (time !== null && /^\d{1,16}$/.test(time)) correctClock(Number(time), sentAt, receivedAt);
      const named = headers.get(SYNC_HEADERS.epoch);
      if (named === null || !EPOCH.test(named)) return;
      if (epoch === undefined) {
        const stored = await replica.epoch();
        epoch ??= stored;
      }
      if (epoch === named) return;
      if (retired.has(named)) throw new TabulaError('sync/offline', `An answer of the sync server from before its data was reset (store ${named}) arrived late; it is ignored and sync retries.`);
      if (epoch === null) {
        epoch = named;
        await replica.setEpoch(named);
        return;
      }
      throw new ServerReset(named, `it answers as store ${named}, and this device synced with store ${epoch}`);
    },
    correctClock,
    epoch: () => epoch,
    async restarted() {
      const left = epoch;
      epoch = await replica.epoch();
      if (typeof left === 'string' && left !== epoch) retired.add(left);
    },
  };
}
