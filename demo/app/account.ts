/**
 * Who is using the demo and where its data lives: the device number from
 * `?device=N` (each device has its own IndexedDB database, so two devices
 * can share one browser), the signed-in user kept in localStorage, and
 * whether a sync server is there at all (`npm run demo` serves one; a
 * static build does not, and the demo then runs offline with sync off).
 */
import { httpSync } from '../../src/sync/index.js';
import type { SyncAdapter } from '../../src/sync/index.js';

const USER_KEY = 'tabula-demo:user';
const SYNC_URL_KEY = 'tabula-demo:sync-url';

/** What the page learned about its environment before opening Tabula. */
export interface Account {
  /** 1 for the default device, N for `?device=N`. */
  readonly device: number;
  /** The signed-in user, or null (local only). */
  readonly user: string | null;
  /** The sync server's URL when the demo server is there, else null (sync off). */
  readonly syncUrl: string | null;
  /** The IndexedDB database of this user on this device. */
  readonly dbName: string;
  /** The Tabula userId of this page. */
  readonly userId: string;
}

function deviceOf(search: string): number {
  const raw = new URLSearchParams(search).get('device');
  const device = raw === null ? 1 : Number(raw);
  return Number.isInteger(device) && device >= 1 && device <= 99 ? device : 1;
}

/** Asks the demo server for its config; null when there is none (static hosting, offline). */
async function probeSync(): Promise<string | null> {
  try {
    const response = await fetch('./demo-api/config', { cache: 'no-store', signal: AbortSignal.timeout(3000) });
    if (!response.ok || !response.headers.get('content-type')?.includes('application/json')) return null;
    const body = (await response.json()) as { sync?: { url?: unknown } };
    return typeof body.sync?.url === 'string' ? new URL(body.sync.url, location.href).href.replace(/\/$/, '') : null;
  } catch {
    return null;
  }
}

/** Reads the device, the user and the server's presence. */
export async function loadAccount(): Promise<Account> {
  const device = deviceOf(location.search);
  const probed = await probeSync();
  const user = localStorage.getItem(USER_KEY);
  if (probed !== null) localStorage.setItem(SYNC_URL_KEY, probed);
  // Signed in but the server is out of reach (offline start): keep syncing to the known server, which reports offline.
  const syncUrl = probed ?? (user === null ? null : localStorage.getItem(SYNC_URL_KEY));
  // One database per user and device: the sync cursor and outbox belong to one user.
  const owner = user ?? 'local';
  return { device, user, syncUrl, dbName: `tabula-demo-${owner}${device === 1 ? '' : `-device-${device}`}`, userId: user ?? 'me' };
}

/** Asks the demo server for a development token for `user`. */
export async function requestToken(user: string): Promise<string> {
  const response = await fetch('./demo-api/sign-in', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user }),
  });
  const body = (await response.json().catch(() => null)) as { token?: string; error?: { message?: string } } | null;
  if (!response.ok || typeof body?.token !== 'string') throw new Error(body?.error?.message ?? `Sign-in failed (HTTP ${response.status}).`);
  return body.token;
}

/** Signs in (checks the name with the server first) and remembers the user in this browser. */
export async function signIn(user: string): Promise<void> {
  await requestToken(user);
  localStorage.setItem(USER_KEY, user);
}

export function signOut(): void {
  localStorage.removeItem(USER_KEY);
}

/** The sync adapter of a signed-in account with a server; null otherwise. */
export function syncFor(account: Account): SyncAdapter | null {
  const { user, syncUrl } = account;
  if (user === null || syncUrl === null) return null;
  // A function token: the client asks again after a 401 (an expired development token).
  return httpSync({ url: syncUrl, token: () => requestToken(user), pollIntervalMs: 2000 });
}

/** The URL of this app as device `device`. */
export function deviceUrl(device: number): string {
  const url = new URL(location.href);
  url.searchParams.set('device', String(device));
  url.hash = '';
  return url.href;
}
