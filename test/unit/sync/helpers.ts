/** Sync client tests: a real sync server (SQLite on a temp file) called in-process, and devices on fake-indexeddb. */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { ApproxTokenCounter, type SessionChange, type Tabula } from '../../../src/index.js';
import { createSyncServer, sqliteStore, type ServerStore, type StoreOptions, type SyncServer } from '../../../src/server/index.js';
import { httpSync, type SyncStatus } from '../../../src/sync/index.js';
import { SECRET, tokenFor } from '../../server/helpers.js';
import { freshTabula, uniqueName } from '../store/helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-sync-client-'));
let serverCount = 0;
const servers: { store: ServerStore; server: SyncServer }[] = [];
afterAll(async () => {
  for (const { store, server } of servers) {
    await server.close();
    await store.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A sync server on its own SQLite file (with the store's `options`), closed after the test file. */
export function startServer(options: StoreOptions = {}): SyncServer {
  // Again here: under `isolate: false` (the mutation runs) this module is shared by the test files, and the
  // first file's afterAll has removed the directory.
  mkdirSync(dir, { recursive: true });
  const store = sqliteStore(path.join(dir, `server-${++serverCount}.db`), options);
  const server = createSyncServer({ store, auth: { secret: SECRET } });
  servers.push({ store, server });
  return server;
}

/** A fetch that reaches `server` without a port. */
export const viaServer = (server: SyncServer): typeof fetch => (input, init) => server.fetch(new Request(input instanceof Request ? input : String(input), init));

/**
 * A device of `userId`: a Tabula on its own database name (pass `name` to open one again, as after a
 * crash), syncing with `server` through `fetchImpl`, polling only when asked (flush()).
 */
export async function device(server: SyncServer, userId: string, fetchImpl: typeof fetch = viaServer(server), name = uniqueName('device')) {
  const token = await tokenFor(userId);
  const tabula = await freshTabula({ name, userId, sync: httpSync({ url: 'http://sync.test', token, fetch: fetchImpl, pollIntervalMs: 3_600_000 }) });
  return Object.assign(tabula, { name });
}


/**
 * A device of `userId` whose syncing the test drives: the leader's own loop is paused, so the device
 * syncs only when the test calls `tabula.sync.flush()` (the leader's first cycle, started while opening,
 * is over once the first flush is: flushes run one after the other). Tokens are counted with
 * ApproxTokenCounter, so counts are the same on every device.
 */
export async function pausedDevice(userId: string, fetchImpl: typeof fetch, label = 'device'): Promise<Tabula & { dbName: string }> {
  const tabula = await freshTabula({
    name: uniqueName(label),
    userId,
    tokenCounter: new ApproxTokenCounter(),
    sync: httpSync({ url: 'http://sync.test', token: await tokenFor(userId), fetch: fetchImpl, pollIntervalMs: 3_600_000 }),
  });
  tabula.sync?.pause();
  return tabula;
}

/** Resolves with the first change `tabula` publishes that `matches`. */
export function nextChange(tabula: Tabula, matches: (change: SessionChange) => boolean): Promise<SessionChange> {
  return new Promise((resolve) => {
    const stop = tabula.subscribe((change) => {
      if (!matches(change)) return;
      stop();
      resolve(change);
    });
  });
}

/** Resolves once `tabula`'s sync status satisfies `matches`. */
export function statusWhere(tabula: Tabula, matches: (status: SyncStatus) => boolean): Promise<SyncStatus> {
  return new Promise((resolve) => {
    const sync = tabula.sync;
    if (!sync) throw new Error('sync is off');
    if (matches(sync.status())) return resolve(sync.status());
    const stop = sync.subscribe((status) => {
      if (!matches(status)) return;
      stop();
      resolve(status);
    });
  });
}
