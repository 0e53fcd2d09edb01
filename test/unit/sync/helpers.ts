/** Sync client tests: a real sync server (SQLite on a temp file) called in-process, and devices on fake-indexeddb. */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';
import { ApproxTokenCounter, type SessionChange, type Tabula } from '../../../src/index.js';
import { createSyncServer, sqliteStore, type ServerStore, type StoreOptions, type SyncServer, type SyncServerOptions } from '../../../src/server/index.js';
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
  return startServerWithStore(options).server;
}

/** A path for a new SQLite file of a store, removed after the test file. */
export function storePath(): string {
  // Again here: under `isolate: false` (the mutation runs) this module is shared by the test files, and the
  // first file's afterAll has removed the directory.
  mkdirSync(dir, { recursive: true });
  return path.join(dir, `server-${++serverCount}.db`);
}

/**
 * A sync server and its store (to put data in past the server's checks, as an older server version
 * stored it) on the SQLite file `file` (a new one by default), with the server's `limits`.
 */
export function startServerWithStore(options: StoreOptions = {}, limits: SyncServerOptions['limits'] = {}, file = storePath()): { server: SyncServer; store: ServerStore; file: string } {
  const store = sqliteStore(file, options);
  const server = createSyncServer({ store, auth: { secret: SECRET }, limits });
  servers.push({ store, server });
  return { server, store, file };
}

/**
 * One URL whose server can be replaced while devices use it: `wipe()` ends the current server's event
 * streams and puts a server on a new, empty store behind the same fetch (its data lost: a restore from
 * an empty volume, a new deployment); `restore(file)` puts one on an existing file (an older copy).
 */
export function replaceableServer(): { fetch: typeof fetch; current(): SyncServer; store(): ServerStore; file(): string; wipe(): Promise<void>; restore(file: string): Promise<void> } {
  let current = startServerWithStore();
  const swap = async (file?: string) => {
    await current.server.close();
    current = startServerWithStore({}, {}, file);
  };
  return {
    fetch: (input, init) => current.server.fetch(new Request(input instanceof Request ? input : String(input), init)),
    current: () => current.server,
    store: () => current.store,
    file: () => current.file,
    wipe: () => swap(),
    restore: (file) => swap(file),
  };
}

/**
 * Runs `open` (which opens a device) with `Date.now` running `skewMs` ahead of the real clock (behind when
 * negative) until it resolves: a Tabula takes its clock as it opens, so the device keeps the skew after.
 * Everything else that reads the clock meanwhile is skewed too (the in-process server!): only for tests
 * where nothing else runs while a device opens. Make its token first.
 */
export async function openSkewed<T>(skewMs: number, open: () => Promise<T>): Promise<T> {
  const real = Date.now;
  Date.now = () => real() + skewMs;
  try {
    return await open();
  } finally {
    Date.now = real;
  }
}

/**
 * Calls `open` with `Date.now` running `skewMs` off the real clock only while `open` runs synchronously:
 * `openTabula()` takes the device's clock before its first await, and the server and the other devices,
 * running meanwhile, keep the real one. `open` must reach openTabula without awaiting anything first.
 */
export function startSkewed<T>(skewMs: number, open: () => Promise<T>): Promise<T> {
  const real = Date.now;
  Date.now = () => real() + skewMs;
  try {
    return open();
  } finally {
    Date.now = real;
  }
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
export async function pausedDevice(userId: string, fetchImpl: typeof fetch, label = 'device', token?: string): Promise<Tabula & { dbName: string }> {
  const tabula = await freshTabula({
    name: uniqueName(label),
    userId,
    tokenCounter: new ApproxTokenCounter(),
    sync: httpSync({ url: 'http://sync.test', token: token ?? (await tokenFor(userId)), fetch: fetchImpl, pollIntervalMs: 3_600_000 }),
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

/**
 * A device of `userId` syncing through `fetchImpl` whose clock runs `skewMs` off the real one (see
 * {@link openSkewed}); `name` reopens a profile. Paused, as {@link pausedDevice}: it syncs only when the
 * test calls `flush()`.
 */
export async function skewedDevice(fetchImpl: typeof fetch, userId: string, skewMs: number, name = uniqueName('device')) {
  const token = await tokenFor(userId);
  const tabula = await openSkewed(skewMs, () =>
    freshTabula({ name, userId, tokenCounter: new ApproxTokenCounter(), sync: httpSync({ url: 'http://sync.test', token, fetch: fetchImpl, pollIntervalMs: 3_600_000 }) }),
  );
  tabula.sync?.pause();
  return Object.assign(tabula, { name });
}
