/**
 * A delete + re-create that drops another device's offline board edits says so (issue 26, item 12):
 * the delete carries what its device had of the old life's board (a Yjs state vector), and a device
 * holding board edits beyond it names their keys in the delete's change (`dropped.blackboard`). Edits the
 * deleting device had pulled before it deleted are named nowhere. And a handle of the old life gets a
 * board that refuses writes with `session/not-found`, not the new life's board. Two devices of one user
 * through a real server; the wall clock moves 1 ms per reading, so "later" means later.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SessionChange, Tabula } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { pausedDevice, startServer, viaServer } from './helpers.js';

beforeEach(() => {
  let now = Date.now();
  vi.spyOn(Date, 'now').mockImplementation(() => (now += 1));
});
afterEach(() => {
  vi.restoreAllMocks();
});

async function twoDevices(): Promise<[Tabula, Tabula]> {
  const server = startServer();
  const user = uniqueUser('alice');
  return [await pausedDevice(user, viaServer(server)), await pausedDevice(user, viaServer(server))];
}

async function syncBoth(one: Tabula, two: Tabula): Promise<void> {
  for (let round = 0; round < 2; round++) {
    await one.sync?.flush();
    await two.sync?.flush();
  }
}

/** The changes of `tabula` that applied a delete of session `s`, as they come. */
function deletesHeardBy(tabula: Tabula): SessionChange[] {
  const heard: SessionChange[] = [];
  tabula.subscribe((change) => {
    if (change.sessionId === 's' && change.kinds.includes('session.delete')) heard.push(change);
  });
  return heard;
}

describe('a delete + re-create and the old life’s blackboard', () => {
  it('names the board keys another device wrote offline that the deleting device never saw', async () => {
    const [one, two] = await twoDevices();
    await (await one.session('s')).append({ role: 'user', content: 'first life' });
    await syncBoth(one, two);
    const stale = await two.session('s');
    const board = stale.blackboard;
    await board.whenLoaded;
    // Two works on the old life's board offline; one deletes the session and creates it again.
    board.update({ plan: 'offline plan', notes: ['a', 'b'] });
    await board.flushed();
    await one.deleteSession('s');
    const renewed = (await one.session('s')).blackboard;
    await renewed.whenLoaded;
    renewed.set('fresh', true);
    await renewed.flushed();
    await one.sync?.flush();
    const heard = deletesHeardBy(two);
    await two.sync?.flush();
    expect(heard).toHaveLength(1);
    expect(heard[0]?.dropped).toEqual({ messages: [], memory: [], notes: [], state: false, blackboard: ['notes', 'plan'] });
    // The old handle's board ended with its life: it refuses writes, and the new life has none of it.
    expect(() => board.set('plan', 'again')).toThrow(expect.objectContaining({ code: 'session/not-found' }) as Error);
    await syncBoth(one, two);
    const seen = (await two.session('s')).blackboard;
    await seen.whenLoaded;
    expect(seen.toJSON()).toEqual({ fresh: true });
    await one.close();
    await two.close();
  });

  it('names board keys beside the other dropped work, in one change', async () => {
    const [one, two] = await twoDevices();
    await (await one.session('s')).append({ role: 'user', content: 'first life' });
    await syncBoth(one, two);
    const stale = await two.session('s');
    const [offline] = await stale.append({ role: 'user', content: 'offline' });
    stale.blackboard.set('k', 1);
    await stale.blackboard.flushed();
    await one.deleteSession('s');
    await one.session('s');
    await one.sync?.flush();
    const heard = deletesHeardBy(two);
    await two.sync?.flush();
    expect(heard.map((change) => change.dropped)).toEqual([{ messages: [offline!.id], memory: [], notes: [], state: false, blackboard: ['k'] }]);
    await one.close();
    await two.close();
  });

  it('names nothing when the deleting device had pulled the board edits before it deleted', async () => {
    const [one, two] = await twoDevices();
    await (await one.session('s')).append({ role: 'user', content: 'first life' });
    await syncBoth(one, two);
    const board = (await two.session('s')).blackboard;
    await board.whenLoaded;
    board.update({ plan: 'shared plan', step: 1 });
    await board.flushed();
    board.delete('step');
    await board.flushed();
    await syncBoth(one, two);
    const mine = (await one.session('s')).blackboard;
    await mine.whenLoaded;
    expect(mine.toJSON()).toEqual({ plan: 'shared plan' });
    await one.deleteSession('s');
    await one.session('s');
    await one.sync?.flush();
    const heard = deletesHeardBy(two);
    await two.sync?.flush();
    expect(heard).toHaveLength(1);
    expect(heard[0]?.dropped).toBeUndefined();
    await one.close();
    await two.close();
  });

  it('names nothing when the deleting device had the board edits stored but not open', async () => {
    const [one, two] = await twoDevices();
    await (await one.session('s')).append({ role: 'user', content: 'first life' });
    await syncBoth(one, two);
    const board = (await two.session('s')).blackboard;
    await board.whenLoaded;
    board.set('plan', 'shared plan');
    await board.flushed();
    // One pulls the edit into its stored board (sync opens it for the pull, then lets it go) and deletes.
    await syncBoth(one, two);
    await one.deleteSession('s');
    await one.sync?.flush();
    const heard = deletesHeardBy(two);
    await two.sync?.flush();
    expect(heard).toHaveLength(1);
    expect(heard[0]?.dropped).toBeUndefined();
    await one.close();
    await two.close();
  });

  it('gives a handle of the old life, first touching its board after the re-create, a board that refuses writes', async () => {
    const [one, two] = await twoDevices();
    await (await one.session('s')).append({ role: 'user', content: 'first life' });
    await syncBoth(one, two);
    const stale = await two.session('s');
    await one.deleteSession('s');
    const renewed = (await one.session('s')).blackboard;
    await renewed.whenLoaded;
    renewed.set('new life', true);
    await renewed.flushed();
    await syncBoth(one, two);
    const board = stale.blackboard;
    await board.whenLoaded;
    expect(() => board.set('into the new life?', true)).toThrow(expect.objectContaining({ code: 'session/not-found', message: expect.stringContaining('"s"') as string }) as Error);
    await expect(board.flushed()).rejects.toMatchObject({ code: 'session/not-found' });
    expect(board.toJSON()).toEqual({});
    const current = (await two.session('s')).blackboard;
    await current.whenLoaded;
    expect(current.toJSON()).toEqual({ 'new life': true });
    await one.close();
    await two.close();
  });

  it('gives a handle of a life deleted on this device a board that refuses writes, even once another handle opened the new life’s', async () => {
    const [one] = await twoDevices();
    const stale = await one.session('s');
    await one.deleteSession('s');
    const renewed = (await one.session('s')).blackboard;
    await renewed.whenLoaded;
    renewed.set('new life', true);
    const board = stale.blackboard;
    await board.whenLoaded;
    expect(() => board.set('into the new life?', true)).toThrow(expect.objectContaining({ code: 'session/not-found' }) as Error);
    expect(board.get('new life')).toBeUndefined();
    expect(renewed.toJSON()).toEqual({ 'new life': true });
    await one.close();
  });
});
