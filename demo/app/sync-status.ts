/**
 * The words and the tone of the sync badge: synced, syncing, offline,
 * N pending, error or signed out, from `tabula.sync.status()` and the
 * browser's own online flag (which knows sooner than a failed request).
 */
import type { SyncStatus } from '../../src/sync/index.js';

/** What the badge shows. */
export interface SyncBadge {
  readonly text: string;
  /** Drives the colour: ok, busy, warn or bad. */
  readonly tone: 'ok' | 'busy' | 'warn' | 'bad' | 'off';
  /** A longer explanation for the tooltip. */
  readonly detail: string;
}

const pendingText = (pending: number) => `${pending} pending`;

/** The badge for a status; `online` is `navigator.onLine`. */
export function syncBadge(status: SyncStatus, online: boolean): SyncBadge {
  const queued = status.pending > 0 ? ` · ${pendingText(status.pending)}` : '';
  if (!online || status.state === 'offline') {
    return { text: `Offline${queued}`, tone: 'warn', detail: 'The sync server is out of reach. Everything is saved here and syncs when it is back.' };
  }
  switch (status.state) {
    case 'syncing':
      return { text: `Syncing…${queued}`, tone: 'busy', detail: 'Sending and fetching changes.' };
    case 'error':
      return { text: 'Sync error', tone: 'bad', detail: status.error?.message ?? 'The last sync failed; it is retried by itself.' };
    case 'unauthorized':
      return { text: 'Signed out by the server', tone: 'bad', detail: status.error?.message ?? 'Sign in again.' };
    case 'idle':
      if (status.pending > 0) return { text: pendingText(status.pending), tone: 'busy', detail: 'Local changes wait for the next sync.' };
      if (status.lastSyncedAt === null) return { text: 'Connecting…', tone: 'busy', detail: 'The first sync has not finished yet.' };
      return { text: 'Synced', tone: 'ok', detail: `Last synced at ${new Date(status.lastSyncedAt).toLocaleTimeString()}.` };
    default:
      return unreachable(status.state);
  }
}

function unreachable(value: never): never {
  throw new Error(`Unknown sync state ${String(value)}`);
}
