/**
 * Devices for sync tests: a sync server on SQLite (a temp file, reached
 * through `server.fetch`, no port) and `openTabula` instances of one user
 * on fake-indexeddb, each its own database, counting tokens with
 * ApproxTokenCounter. The leader's own loop is paused, so a test decides
 * when each device syncs (`tabula.sync.flush()`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApproxTokenCounter, type Tabula } from '../../../src/index.js';
import { createSyncServer, sqliteStore, type SyncServer } from '../../../src/server/index.js';
import { httpSync } from '../../../src/sync/index.js';
import { SECRET, tokenFor } from '../../server/helpers.js';
import { freshTabula, uniqueName } from '../store/helpers.js';

/** Servers on temp files; `close()` closes them all and removes the files (call it in afterAll). */
export function serverPool(): { start(): SyncServer; close(): Promise<void> } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-sync-test-'));
  const opened: { close(): Promise<void> }[] = [];
  let count = 0;
  return {
    start() {
      const store = sqliteStore(path.join(dir, `server-${++count}.db`));
      const server = createSyncServer({ store, auth: { secret: SECRET } });
      opened.push({ close: async () => (await server.close(), await store.close()) });
      return server;
    },
    async close() {
      for (const one of opened.splice(0)) await one.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A fetch that reaches `server` without a port. */
export function viaServer(server: SyncServer): typeof fetch {
  return (input, init) => server.fetch(new Request(input instanceof Request ? input : String(input), init));
}

/** A device of `userId`: its own database, syncing through `fetchImpl` when the test flushes it. */
export async function openDevice(userId: string, fetchImpl: typeof fetch, label = 'device'): Promise<Tabula> {
  const tabula = await freshTabula({
    name: uniqueName(label),
    userId,
    tokenCounter: new ApproxTokenCounter(),
    sync: httpSync({ url: 'http://sync.test', token: await tokenFor(userId), fetch: fetchImpl, pollIntervalMs: 3_600_000 }),
  });
  // The test decides when this device syncs; the leader's first cycle, started while opening, is
  // over once the test's first flush is (flushes run one after the other).
  tabula.sync?.pause();
  return tabula;
}
