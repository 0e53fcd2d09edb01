/**
 * Writes made while a profile is opened without sync (issue 26, item 4): a
 * device reopened without `sync` (the open-before-sign-in pattern, an app
 * that turns sync off), or a tab opened without `sync` beside a synced one.
 * The first sync of a user queued what the profile held, once; writes made
 * with sync off afterwards were never queued, and status said everything was
 * synced. Now every write of a user who has synced on this profile is queued,
 * with sync on or off, and the leader hears of it.
 */
import { describe, expect, it, vi } from 'vitest';
import { ApproxTokenCounter, type SaveConflictInfo, type Tabula } from '../../../src/index.js';
import { httpSync } from '../../../src/sync/index.js';
import { tokenFor, uniqueUser } from '../../server/helpers.js';
import { freshTabula, uniqueName } from '../store/helpers.js';
import { device, startServer, viaServer } from './helpers.js';

/** What a fresh device of `user` pulls of session `sessionId`: its messages, memory and board. */
async function onFreshDevice(server: ReturnType<typeof startServer>, user: string, sessionId: string) {
  const fresh = await device(server, user);
  await fresh.sync?.flush();
  const found = (await fresh.sessions()).some((s) => s.sessionId === sessionId);
  const seen = found
    ? await (async () => {
        const session = await fresh.session(sessionId);
        await session.blackboard.whenLoaded;
        return { messages: (await session.messages()).map((m) => m.content), memory: await session.memory().get('k'), board: session.blackboard.toJSON() };
      })()
    : null;
  await fresh.close();
  return seen;
}

/** A synced Tabula on profile `name` whose background loop is paused: it syncs when the test flushes. */
async function pausedOn(server: ReturnType<typeof startServer>, user: string, name: string, fetchImpl: typeof fetch = viaServer(server)): Promise<Tabula> {
  const tabula = await freshTabula({
    name,
    userId: user,
    tokenCounter: new ApproxTokenCounter(),
    sync: httpSync({ url: 'http://sync.test', token: await tokenFor(user), fetch: fetchImpl, pollIntervalMs: 3_600_000 }),
  });
  tabula.sync?.pause();
  return tabula;
}

describe('httpSync: writes made while the profile is opened without sync', () => {
  it('a device reopened without sync: what it writes is queued, and pushed when it opens with sync again', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('device');
    const synced = await device(server, alice, viaServer(server), name);
    await (await synced.session('chat')).append({ role: 'user', content: 'with sync' });
    await synced.sync?.flush();
    await synced.close();

    const plain = await freshTabula({ name, userId: alice });
    const chat = await plain.session('chat');
    await chat.append({ role: 'user', content: 'without sync' });
    await chat.memory().set('k', 'set without sync');
    await (await plain.session('new-chat')).append({ role: 'user', content: 'a chat begun without sync' });
    await plain.close();

    // Reopened with sync while the server is out of reach: what waits (an append, a memory set, a create and
    // an append) is counted, not reported as synced.
    let online = false;
    const again = await pausedOn(server, alice, name, (input, init) => (online ? viaServer(server)(input, init) : Promise.reject(new TypeError('fetch failed'))));
    await vi.waitFor(() => expect(again.sync?.status().pending).toBe(4), { timeout: 20_000 });
    online = true;
    await again.sync?.flush();
    expect(again.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
    expect(await onFreshDevice(server, alice, 'chat')).toEqual({ messages: ['with sync', 'without sync'], memory: 'set without sync', board: {} });
    expect((await onFreshDevice(server, alice, 'new-chat'))?.messages).toEqual(['a chat begun without sync']);
    await again.close();
  });

  it('a save made without sync that another device’s save replaces is reported as a conflict once the device syncs', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('device');
    const synced = await pausedOn(server, alice, name);
    await synced.session('chat');
    await synced.sync?.flush();
    await synced.close();
    const other = await pausedOn(server, alice, uniqueName('other'));
    await other.sync?.flush();

    const plain = await freshTabula({ name, userId: alice });
    await (await plain.session('chat')).save({ tasks: 'saved without sync' });
    await plain.close();
    // The other device's save of the same version comes later: it wins everywhere, and was not built on the first.
    await (await other.session('chat')).save({ tasks: 'saved on the other device' });
    await other.sync?.flush();

    const again = await pausedOn(server, alice, name);
    const told: SaveConflictInfo[] = [];
    again.subscribe((change) => {
      if (change.conflict) told.push(change.conflict);
    });
    await again.sync?.flush();
    expect(await (await again.session('chat')).state()).toMatchObject({ version: 1, tasks: 'saved on the other device' });
    expect(told).toEqual([
      { version: 1, local: expect.objectContaining({ tasks: 'saved without sync' }) as unknown, remote: expect.objectContaining({ tasks: 'saved on the other device' }) as unknown },
    ]);
    await again.close();
    await other.close();
  });

  it('a tab opened without sync beside a synced one: its writes reach the synced tab’s leader, which counts and pushes them', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('device');
    const synced = await pausedOn(server, alice, name);
    await synced.session('chat');
    await synced.sync?.flush();
    expect(synced.sync?.status()).toMatchObject({ pending: 0 });

    const plain = await freshTabula({ name, userId: alice });
    const chat = await plain.session('chat');
    await chat.append({ role: 'user', content: 'from the tab without sync' });
    // The tab without sync tells the leader: its status counts the write, without a flush.
    await vi.waitFor(() => expect(synced.sync?.status().pending).toBe(1), { timeout: 20_000 });
    await synced.sync?.flush();
    expect(await onFreshDevice(server, alice, 'chat')).toEqual({ messages: ['from the tab without sync'], memory: undefined, board: {} });

    // A board write of the tab without sync: the leader hears of it and queues it on its next push.
    await chat.blackboard.whenLoaded;
    chat.blackboard.set('plan', 'from the tab without sync');
    await chat.blackboard.flushed();
    await vi.waitFor(
      async () => {
        await synced.sync?.flush();
        expect((await onFreshDevice(server, alice, 'chat'))?.board).toEqual({ plan: 'from the tab without sync' });
      },
      { timeout: 30_000, interval: 50 },
    );
    await plain.close();
    await synced.close();
  });
});
