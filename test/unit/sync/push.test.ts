/**
 * The leader's push of what its own tab just wrote: the write hands its
 * committed outbox rows to the engine, which sends them without reading the
 * outbox back first, but only when they continue what the server
 * acknowledged. Rows of another tab of the profile in between, or a failed
 * push, send the leader back to the outbox: nothing is skipped, doubled or
 * pushed out of order.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Tabula } from '../../../src/index.js';
import type { SyncServer } from '../../../src/server/index.js';
import { SYNC_PATHS } from '../../../src/sync/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { fcParams } from '../seed.js';
import { uniqueName } from '../store/helpers.js';
import { device, startServer, statusWhere, viaServer } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every read of the outbox's rows (not counts), and every push sent, in the order they happened. */
function watch(server: SyncServer) {
  const events: string[] = [];
  for (const method of ['getAll', 'openCursor'] as const) {
    const original = Reflect.get(IDBObjectStore.prototype, method) as (this: IDBObjectStore, ...args: unknown[]) => IDBRequest;
    vi.spyOn(IDBObjectStore.prototype, method).mockImplementation(function (this: IDBObjectStore, ...args: unknown[]) {
      if (this.name === 'outbox') events.push('outbox read');
      return original.apply(this, args);
    });
  }
  const via = viaServer(server);
  const fetchImpl: typeof fetch = (input, init) => {
    if (String(input instanceof Request ? input.url : input).endsWith(SYNC_PATHS.push)) events.push('push');
    return via(input, init);
  };
  return { events, fetch: fetchImpl };
}

/** The texts of a session's messages on `tabula`, in order. */
async function texts(tabula: Tabula, sessionId: string): Promise<string[]> {
  return (await (await tabula.session(sessionId)).messages()).map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content)));
}

describe('httpSync: the leader pushes its own tab’s writes', () => {
  it('sends a write of its tab without reading the outbox before the push, once the server has acknowledged the rows before it', { timeout: 30_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const { events, fetch } = watch(server);
    const leader = await device(server, alice, fetch);
    // Only the test's flushes sync: a cycle of the leader's own (woken by a poke, say) could read the outbox
    // the moment the append commits, before its rows are handed over, and the order would be a race.
    leader.sync?.pause();
    const chat = await leader.session('chat');
    // The create goes out through the outbox (nothing acknowledged yet): from then on the server's lastSeq is known.
    await leader.sync?.flush();
    expect(events).toContain('push');
    events.length = 0;
    await chat.append({ role: 'user', content: 'straight out' });
    // The push comes first; the read after it finds the outbox empty and ends the push.
    await leader.sync?.flush();
    expect(events).toEqual(['push', 'outbox read']);
    const other = await device(server, alice);
    await other.sync?.flush();
    expect(await texts(other, 'chat')).toEqual(['straight out']);
    expect(leader.reported).toEqual([]);
    await leader.close();
    await other.close();
  });

  it('writes of two tabs in any interleaving reach the server once each, in order, with no gap refused', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.boolean(), { minLength: 2, maxLength: 8 }), async (byLeader) => {
        const server = startServer();
        const alice = uniqueUser('alice');
        const name = uniqueName('device');
        const leader = await device(server, alice, viaServer(server), name);
        await statusWhere(leader, (status) => status.lastSyncedAt !== null);
        const follower = await device(server, alice, viaServer(server), name);
        const [inLeader, inFollower] = [await leader.session('chat'), await follower.session('chat')];
        // Not awaited one by one: the leader pushes while the other tab's rows are being numbered.
        const writes = byLeader.map((lead, i) => (lead ? inLeader : inFollower).append({ role: 'user', content: `m${i}` }));
        await Promise.all(writes);
        await leader.sync?.flush();
        const other = await device(server, alice);
        await other.sync?.flush();
        expect(new Set(await texts(other, 'chat'))).toEqual(new Set(byLeader.map((_, i) => `m${i}`)));
        expect(await (await other.session('chat')).messageCount()).toBe(byLeader.length);
        expect([...leader.reported, ...follower.reported]).toEqual([]);
        expect(leader.sync?.status().state).toBe('idle');
        await leader.close();
        await follower.close();
        await other.close();
      }),
      fcParams(10),
    );
  });
});
