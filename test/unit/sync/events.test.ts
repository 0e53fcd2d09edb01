/**
 * Sync without flush(): the leader tab pushes what any tab of its profile
 * writes, the server's event stream pokes the other devices, and they pull.
 * Every device polls once an hour here, so only pokes and nudges can make
 * these tests pass.
 */
import { describe, expect, it } from 'vitest';
import type { Tabula } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { uniqueName } from '../store/helpers.js';
import { device, nextChange, startServer, statusWhere, viaServer } from './helpers.js';
import type { SyncServer } from '../../../src/server/index.js';

/**
 * Two tabs of one device (two Tabulas on one database name): the first leads (only the leader syncs
 * by itself, so its first cycle finishing shows it leads), the second opens after it.
 */
async function twoTabs(server: SyncServer, userId: string): Promise<[Tabula, Tabula]> {
  const name = uniqueName('device');
  const leader = await device(server, userId, viaServer(server), name);
  await statusWhere(leader, (status) => status.lastSyncedAt !== null);
  return [leader, await device(server, userId, viaServer(server), name)];
}

describe('httpSync: events and tabs', () => {
  it('a write in a tab that does not lead reaches another device without flush(): the leader pushes, the server pokes', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const [leader, follower] = await twoTabs(server, alice);
    const other = await device(server, alice);
    await statusWhere(other, (status) => status.lastSyncedAt !== null);

    const arrived = nextChange(other, (change) => change.origin === 'remote' && change.sessionId === 'chat' && change.kinds.includes('message.append'));
    await (await follower.session('chat')).append({ role: 'user', content: 'from the tab that does not lead' });
    await arrived;
    expect((await (await other.session('chat')).messages()).map((m) => m.content)).toEqual(['from the tab that does not lead']);
    // The follower shows the leader's status: nothing pending once the leader pushed.
    await statusWhere(follower, (status) => status.state === 'idle' && status.pending === 0 && status.lastSyncedAt !== null);

    // A board change travels the same way.
    const board = (await other.session('chat')).blackboard;
    await board.whenLoaded;
    const boardArrived = new Promise<void>((resolve) => board.observe((changes) => changes.some((c) => c.origin === 'remote') && resolve()));
    const written = (await follower.session('chat')).blackboard;
    await written.whenLoaded;
    written.set('from', 'follower');
    await boardArrived;
    expect(board.get('from')).toBe('follower');
    await leader.close();
    await follower.close();
    await other.close();
  });

  it('pending counts local writes while sync is paused, in the leader and in the other tabs', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const [leader, follower] = await twoTabs(server, alice);
    leader.sync?.pause();
    const chat = await follower.session('chat');
    await chat.append({ role: 'user', content: 'queued' });
    await chat.note('queued too');
    // create + append + note, counted without a push.
    await statusWhere(leader, (status) => status.pending === 3);
    await statusWhere(follower, (status) => status.pending === 3);
    leader.sync?.resume();
    await statusWhere(follower, (status) => status.pending === 0 && status.state === 'idle');
    await leader.close();
    await follower.close();
  });

  it('when the leader tab closes, another tab of the profile takes over', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const [first, second] = await twoTabs(server, alice);
    const other = await device(server, alice);
    await statusWhere(other, (status) => status.lastSyncedAt !== null);
    await first.close();
    const arrived = nextChange(other, (change) => change.origin === 'remote' && change.kinds.includes('note.add'));
    await (await second.session('chat')).note('after the leader left');
    await arrived;
    expect((await (await other.session('chat')).notes()).map((n) => n.text)).toEqual(['after the leader left']);
    await second.close();
    await other.close();
  });
});
