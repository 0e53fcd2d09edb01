/**
 * Convergence rules of the one write path seen through sync (issue 26):
 * two devices of one user through a real server, offline while they write,
 * compared through the public API. Each scenario is one fault that a
 * device met, reproduced: a removed message that a concurrent restore
 * brought back, one history forked into one id in two orders, a save
 * replaced by a higher version without a word, and a delete that wiped
 * another device's offline work in silence. The wall clock moves 1 ms per
 * reading, so every op has its own millisecond and "later" means later.
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

/** Two devices of a new user on a new server. */
async function twoDevices(): Promise<[Tabula, Tabula]> {
  const server = startServer();
  const user = uniqueUser('alice');
  return [await pausedDevice(user, viaServer(server)), await pausedDevice(user, viaServer(server))];
}

/** Flushes each device in turn, twice round, so that everything each one pushed has reached the other. */
async function syncBoth(one: Tabula, two: Tabula): Promise<void> {
  for (let round = 0; round < 2; round++) {
    await one.sync?.flush();
    await two.sync?.flush();
  }
}

/** Every change `tabula` hears (from any session), to look at afterwards. */
function heardBy(tabula: Tabula): SessionChange[] {
  const heard: SessionChange[] = [];
  tabula.subscribe((change) => heard.push(change));
  return heard;
}

describe('sync: convergence rules (issue 26)', () => {
  it('a message removed on one device after another device restored a checkpoint stays removed on both', async () => {
    const [one, two] = await twoDevices();
    const session = await one.session('s');
    const [kept, removed] = await session.append([
      { role: 'user', content: 'kept' },
      { role: 'user', content: 'removed' },
    ]);
    await session.checkpoint('both');
    await syncBoth(one, two);
    const other = await two.session('s');
    const [checkpoint] = await other.checkpoints();
    await other.restore(checkpoint!.id);
    // One removes the message after two's restore, without having seen it.
    await session.memory().transact((tx) => tx.removeMessages([removed!.id]));
    await two.sync?.flush();
    await one.sync?.flush();
    await two.sync?.flush();
    const ids = async (tabula: Tabula) => (await (await tabula.session('s')).messages()).map((m) => m.id);
    expect(await ids(two)).toEqual([kept!.id]);
    expect(await ids(one)).toEqual([kept!.id]);
    await one.close();
    await two.close();
  });

  it('one history forked into the same id on two devices is in one order on both, with its notes once', async () => {
    const [one, two] = await twoDevices();
    const source = await one.session('source');
    await source.append([
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'b' },
    ]);
    await source.note('a note');
    await source.journal.record({ step: 1 });
    await syncBoth(one, two);
    // Two forks first: its copy's order keys come from an earlier clock reading than one's.
    const onTwo = await (await two.session('source')).fork('fork');
    const onOne = await source.fork('fork');
    // Each device goes on writing to its copy before it hears of the other's.
    await onOne.append({ role: 'user', content: 'from one' });
    await onTwo.append({ role: 'user', content: 'from two' });
    await syncBoth(one, two);
    const shown = async (tabula: Tabula) => {
      const fork = await tabula.session('fork');
      return {
        messages: (await fork.messages()).map((m) => [m.id, m.order, m.content]),
        notes: (await fork.notes()).map((n) => [n.id, n.text]),
        journal: await fork.journal.view(),
      };
    };
    const seen = await shown(one);
    expect(seen.messages.map(([, , content]) => content)).toEqual(['a', 'b', 'from one', 'from two']);
    expect(seen.notes.map(([, text]) => text)).toEqual(['a note']);
    expect(seen.journal).toEqual([{ step: 1 }]);
    expect(await shown(two)).toEqual(seen);
    await one.close();
    await two.close();
  });

  it('a save replaced by another device’s save of a higher version, not built on it, is reported to the device that made it', async () => {
    const [one, two] = await twoDevices();
    const session = await one.session('s');
    await session.save({ tasks: 'v1' });
    await syncBoth(one, two);
    const other = await two.session('s');
    const heardOnOne = heardBy(one);
    const heardOnTwo = heardBy(two);
    // One saves v2 and v3 offline; two saves its own v2, later, on v1.
    await session.save({ tasks: 'one v2' });
    await session.save({ tasks: 'one v3' });
    await other.save({ tasks: 'two v2' });
    await one.sync?.flush();
    await two.sync?.flush();
    await one.sync?.flush();
    expect(await other.state()).toMatchObject({ version: 3, tasks: 'one v3' });
    expect(await session.state()).toMatchObject({ version: 3, tasks: 'one v3' });
    expect(heardOnTwo.flatMap((change) => (change.conflict ? [change.conflict] : []))).toEqual([
      { version: 2, local: expect.objectContaining({ tasks: 'two v2' }) as unknown, remote: expect.objectContaining({ tasks: 'one v3' }) as unknown },
    ]);
    // One's saves were not replaced: it hears of none.
    expect(heardOnOne.filter((change) => change.conflict)).toEqual([]);
    await one.close();
    await two.close();
  });

  it('a delete and re-create on one device names the offline work of another device it drops, and that device’s old handle writes no more', async () => {
    const [one, two] = await twoDevices();
    await (await one.session('s')).append({ role: 'user', content: 'first life' });
    await syncBoth(one, two);
    const stale = await two.session('s');
    // One deletes the session and creates it again while two works on the old life offline.
    await one.deleteSession('s');
    await (await one.session('s')).append({ role: 'user', content: 'second life' });
    const offline = await stale.append(Array.from({ length: 5 }, (_, i) => ({ role: 'user' as const, content: `offline ${i}` })));
    await stale.memory().set('k', 'old');
    await stale.note('old note');
    const [note] = await stale.notes();
    await stale.save({ summary: 'old summary' });
    const heard = heardBy(two);
    await one.sync?.flush();
    await two.sync?.flush();
    const deletes = heard.filter((change) => change.sessionId === 's' && change.kinds.includes('session.delete'));
    expect(deletes).toHaveLength(1);
    expect(deletes[0]?.dropped).toEqual({
      messages: offline.map((m) => m.id),
      memory: [{ scope: 'default', key: 'k' }],
      notes: [note!.id],
      state: true,
    });
    // The old handle belongs to the life that ended: it writes nothing into the new one.
    await expect(stale.append({ role: 'user', content: 'into the new life?' })).rejects.toMatchObject({ code: 'session/not-found' });
    await expect(stale.memory().set('k', 'again')).rejects.toMatchObject({ code: 'session/not-found' });
    await expect(stale.note('again')).rejects.toMatchObject({ code: 'session/not-found' });
    await expect(stale.save({ summary: 'again' })).rejects.toMatchObject({ code: 'session/not-found' });
    const renewed = await two.session('s');
    expect((await renewed.messages()).map((m) => m.content)).toEqual(['second life']);
    await one.close();
    await two.close();
  });

  it('a delete of a session whose every op the deleting device had seen names nothing', async () => {
    const [one, two] = await twoDevices();
    const session = await one.session('s');
    await session.append({ role: 'user', content: 'seen everywhere' });
    await session.memory().set('k', 1);
    await syncBoth(one, two);
    await (await two.session('s')).note('seen too');
    await syncBoth(one, two);
    const heard = heardBy(two);
    await one.deleteSession('s');
    await one.sync?.flush();
    await two.sync?.flush();
    const deletes = heard.filter((change) => change.kinds.includes('session.delete'));
    expect(deletes).toHaveLength(1);
    expect(deletes[0]?.dropped).toBeUndefined();
    await one.close();
    await two.close();
  });
});
