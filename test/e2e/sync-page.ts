/**
 * The page behind the sync e2e tests and the sync benchmark: one "device"
 * per browser context. `window.syncPage.open()` opens Tabula with
 * `httpSync` against a real sync server and keeps, as `window.device`, the
 * Tabula, every change event it hears and every sync status it reports, so
 * a test can wait for them. The token is read from `window.syncPage.token`
 * on every request the client makes, so a test can expire and renew it.
 */
import * as tabulaSdk from '../../src/index.js';
import { httpSync } from '../../src/sync/index.js';
import type { SessionChange, Tabula } from '../../src/index.js';
import type { SyncStatus } from '../../src/sync/index.js';

/** What `window.device` holds once `open()` resolved. */
export interface SyncDevice {
  readonly tabula: Tabula;
  /** Every change event of every session, in the order heard. */
  readonly changes: SessionChange[];
  /** Every sync status reported, in order. */
  readonly statuses: SyncStatus[];
  /** Requests the client made, by path ('/v1/push', '/v1/pull', ...). */
  readonly requests: Record<string, number>;
}

export interface OpenDeviceOptions {
  readonly name: string;
  readonly userId: string;
  readonly url: string;
  readonly pollIntervalMs?: number;
}

export interface SyncPage {
  /** The token the client gets the next time it asks (after a 401 or when it has none). */
  token: string;
  open(options: OpenDeviceOptions): Promise<void>;
  readonly sdk: typeof tabulaSdk;
}

declare global {
  interface Window {
    syncPage: SyncPage;
    device: SyncDevice;
    syncPageReady: true;
  }
}

const page: SyncPage = {
  token: '',
  sdk: tabulaSdk,
  async open({ name, userId, url, pollIntervalMs }) {
    const requests: Record<string, number> = {};
    const counting: typeof fetch = (input, init) => {
      const path = new URL(input instanceof Request ? input.url : String(input)).pathname;
      requests[path] = (requests[path] ?? 0) + 1;
      return fetch(input, init);
    };
    const tabula = await tabulaSdk.openTabula({
      name,
      userId,
      tokenCounter: new tabulaSdk.ApproxTokenCounter(),
      sync: httpSync({ url, token: () => page.token, fetch: counting, ...(pollIntervalMs === undefined ? {} : { pollIntervalMs }) }),
    });
    const device: SyncDevice = { tabula, changes: [], statuses: [], requests };
    tabula.subscribe((change) => device.changes.push(change));
    tabula.sync?.subscribe((status) => device.statuses.push(status));
    window.device = device;
  },
};

window.syncPage = page;
window.syncPageReady = true;
