/**
 * Tab leadership of one user's sync on a profile: one tab at a time holds
 * the user's leader lock (a Web Lock) and runs the engine's loop; it tells
 * the other tabs its status (and its clock offset, so that every tab orders
 * its writes by the same corrected clock) on the user's channel, and they
 * hand it their writes with a nudge. The status lives here because it is
 * what the tabs share: the leader's is shown in every tab. A malformed
 * message from another tab is ignored.
 */
import { TabulaError } from '../core/errors.js';
import { SYNC_NUDGE, type ParkedItem, type SyncHost, type SyncStatus } from '../store/replication/contract.js';

/** A parked item as a status message carries it: the refusal as code and message. */
type ParkedMessage = Omit<ParkedItem, 'reason'> & { reason: { code: string; message: string } };

/** What the leader tells the other tabs of the profile, and what they ask of it. */
type TabMessage =
  | {
      v: 1;
      kind: 'status';
      state: SyncStatus['state'];
      pending: number;
      lastSyncedAt: number | null;
      error: { code: string; message: string } | null;
      parked?: ParkedMessage[];
      /** The leader's clock offset: every tab of the profile orders its writes by the same corrected clock. */
      offsetMs?: number;
    }
  | { v: 1; kind: 'nudge' };

function isTabMessage(raw: unknown): raw is TabMessage {
  if (typeof raw !== 'object' || raw === null) return false;
  const m = raw as Record<string, unknown>;
  return m.v === 1 && (m.kind === 'nudge' || (m.kind === 'status' && typeof m.state === 'string' && typeof m.pending === 'number'));
}

/** The parked items of a status message (an unreadable entry is left out). */
function parkedOf(list: readonly ParkedMessage[]): ParkedItem[] {
  return list
    .filter((entry) => typeof entry === 'object' && entry !== null && typeof entry.id === 'string')
    .map(({ id, seq, kind, sessionId, messageId, reason }) => ({
      id,
      seq,
      kind,
      sessionId,
      ...(messageId === undefined ? {} : { messageId }),
      reason: new TabulaError(reason.code as TabulaError['code'], reason.message),
    }));
}

/** One tab's part in the leadership of the user's sync, and the status it shows. */
export interface Leadership {
  /** True while this tab holds the leader lock and runs the loop. */
  leading(): boolean;
  status(): SyncStatus;
  /** Replaces the status (the last error goes unless `next` has one), tells the listeners and, when leading, the other tabs. */
  setStatus(next: Partial<SyncStatus> & { state: SyncStatus['state'] }): void;
  subscribe(listener: (status: SyncStatus) => void): () => void;
  /** Asks for the leader lock: the loop runs once it is granted (at once, when no other tab holds it). */
  stand(): void;
  /** Asks the leader in another tab to push (this tab queued rows, or dropped a parked item). */
  nudgeLeader(): void;
  /** Leaves the channel at once; resolves when the loop has ended (abort the lock's signal first). */
  close(): Promise<void>;
}

/** How the engine takes part: its loop (run while leading), what a nudge from another tab does, and when it is closed. */
export interface LeadershipOptions {
  readonly lead: () => Promise<void>;
  readonly onNudge: () => void;
  readonly signal: AbortSignal;
  readonly closed: () => boolean;
  /** The TabulaError of a failure of the lock (see syncError). */
  readonly toError: (error: unknown) => TabulaError;
}

/** Joins the leadership of `host.userId`'s sync on the profile: the channel now, the lock at {@link Leadership.stand}. */
export function joinLeadership(host: SyncHost, options: LeadershipOptions): Leadership {
  let status: SyncStatus = { state: 'idle', pending: 0, lastSyncedAt: null, parked: [] };
  const listeners = new Set<(status: SyncStatus) => void>();
  const tabs = typeof BroadcastChannel === 'function' ? new BroadcastChannel(host.channel) : null;
  let leading = false;
  /** Set by close(): a closed channel throws on postMessage. */
  let left = false;

  const setStatus = (next: Partial<SyncStatus> & { state: SyncStatus['state'] }) => {
    const { error: _dropped, ...rest } = status;
    status = { ...rest, ...next };
    for (const listener of listeners) listener(status);
    if (leading && !left) {
      const { state, pending, lastSyncedAt, error } = status;
      const parked = status.parked.map(({ reason, ...item }) => ({ ...item, reason: { code: reason.code, message: reason.message } }));
      tabs?.postMessage({ v: 1, kind: 'status', state, pending, lastSyncedAt, error: error ? { code: error.code, message: error.message } : null, parked, offsetMs: host.clock.offsetMs() } satisfies TabMessage);
    }
  };

  if (tabs) {
    tabs.onmessage = (event: MessageEvent<unknown>) => {
      if (!isTabMessage(event.data)) return;
      const message = event.data;
      if (message.kind === 'nudge') {
        if (leading) options.onNudge();
      } else if (!leading) {
        // Another tab leads: show its status here, and order this tab's writes by its clock offset.
        const { state, pending, lastSyncedAt, error, parked, offsetMs } = message;
        if (typeof offsetMs === 'number' && Number.isFinite(offsetMs)) host.clock.setOffsetMs(offsetMs);
        setStatus({
          state,
          pending,
          lastSyncedAt,
          parked: Array.isArray(parked) ? parkedOf(parked) : status.parked,
          ...(error ? { error: new TabulaError(error.code as TabulaError['code'], error.message) } : {}),
        });
      }
    };
  }

  let leadership: Promise<void> = Promise.resolve();

  return {
    leading: () => leading,
    status: () => status,
    setStatus,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stand() {
      leadership = host.locks
        .request(host.leaderLock, { signal: options.signal }, () => {
          leading = true;
          return options.lead();
        })
        .catch((error: unknown) => {
          if (!options.closed()) host.onError(options.toError(error));
        });
    },
    nudgeLeader() {
      if (!left) tabs?.postMessage(SYNC_NUDGE satisfies TabMessage);
    },
    close() {
      left = true;
      tabs?.close();
      return leadership;
    },
  };
}
