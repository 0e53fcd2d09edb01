/**
 * The client meeting the server's bounds: an event stream that ends with
 * `expired` (its token no longer accepted) is reopened with a fresh token
 * from `token()`, and the stale one is never sent again; and a
 * 429 `sync/rate-limited` or 408 `sync/timeout` is "retry later" (status
 * `offline`, nothing reported to onError), never a fatal error. Every device
 * polls once an hour, so only these paths can make the tests pass.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSyncServer, sqliteStore, type ServerStore, type SyncServer } from '../../../src/server/index.js';
import { SYNC_PATHS, httpSync } from '../../../src/sync/index.js';
import { tokenFor, uniqueUser } from '../../server/helpers.js';
import { freshTabula } from '../store/helpers.js';
import { startServer, statusWhere, viaServer } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-sync-limits-'));
const opened: { store: ServerStore; server: SyncServer }[] = [];
afterAll(async () => {
  for (const { store, server } of opened) {
    await server.close();
    await store.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

const tokenOf = (init: RequestInit | undefined): string => new Headers(init?.headers).get('authorization')?.replace(/^Bearer /, '') ?? '';

describe('httpSync and the server’s bounds', () => {
  it('reopens a stream that ended with `expired` with a fresh token from token(), and never sends the expired one again', { timeout: 90_000 }, async () => {
    const alice = uniqueUser('alice');
    // The first token is accepted for 1.5 s after it is handed out, the later ones for an hour.
    const handedOut = new Map<string, number>();
    const store = sqliteStore(path.join(dir, 'expiring.db'));
    const server = createSyncServer({
      store,
      auth: { verify: (token) => ({ userId: alice, expiresAtMs: (handedOut.get(token) ?? 0) + (token === 'token-1' ? 1500 : 3_600_000) }) },
    });
    opened.push({ store, server });
    const streams: string[] = [];
    const answers: { path: string; token: string; status: number }[] = [];
    let reopened: () => void = () => {};
    const secondStream = new Promise<void>((resolve) => (reopened = resolve));
    const via = viaServer(server);
    const tabula = await freshTabula({
      userId: alice,
      sync: httpSync({
        url: 'http://sync.test',
        token: () => {
          const token = `token-${handedOut.size + 1}`;
          handedOut.set(token, Date.now());
          return token;
        },
        fetch: async (input, init) => {
          const { pathname } = new URL(input instanceof Request ? input.url : String(input));
          if (pathname === SYNC_PATHS.events) streams.push(tokenOf(init));
          const response = await via(input, init);
          answers.push({ path: pathname, token: tokenOf(init), status: response.status });
          if (streams.length === 2) reopened();
          return response;
        },
        pollIntervalMs: 3_600_000,
      }),
    });
    await secondStream;
    expect(streams).toEqual(['token-1', 'token-2']);
    // The cycle that follows the stream's end asked for a fresh token first: nothing was refused.
    expect(answers.filter((answer) => answer.status !== 200)).toEqual([]);
    expect(tabula.reported).toEqual([]);
    await tabula.close();
  });

  for (const [status, code] of [
    [429, 'sync/rate-limited'],
    [408, 'sync/timeout'],
  ] as const) {
    it(`takes a ${status} on push as retry-later: status offline with ${code}, nothing reported, the next cycle pushes`, { timeout: 60_000 }, async () => {
      const server = startServer();
      const alice = uniqueUser('alice');
      const via = viaServer(server);
      let refuse = true;
      const tabula = await freshTabula({
        userId: alice,
        sync: httpSync({
          url: 'http://sync.test',
          token: await tokenFor(alice),
          fetch: async (input, init) => {
            if (refuse && (input instanceof Request ? input.url : String(input)).endsWith(SYNC_PATHS.push)) {
              // The 408 without a body, as a proxy might send it: the status alone says what it means.
              const body = status === 429 ? JSON.stringify({ error: { code, message: 'too many event streams; retry later' } }) : '';
              return new Response(body, { status, headers: { 'content-type': 'application/json' } });
            }
            return via(input, init);
          },
          pollIntervalMs: 3_600_000,
        }),
      });
      await statusWhere(tabula, (s) => s.lastSyncedAt !== null);
      await (await tabula.session('s')).note('queued behind a refusal');
      await expect(tabula.sync?.flush()).rejects.toMatchObject({ code });
      // The leader's own cycle for the write may run after the flush's: whichever ran last, the state it leaves.
      const settled = await statusWhere(tabula, (s) => s.state !== 'syncing');
      expect(settled).toMatchObject({ state: 'offline', error: { code } });
      expect(settled.pending).toBeGreaterThan(0);
      refuse = false;
      await tabula.sync?.flush();
      expect(tabula.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
      expect(tabula.reported).toEqual([]);
      await tabula.close();
    });
  }
});
