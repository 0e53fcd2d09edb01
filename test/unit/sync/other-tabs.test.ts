/**
 * What sync brings reaches the device's other tabs (changes.ts with a real
 * sync server, so Node only; the feed's wire is test/unit/store/changes.test.ts):
 * a second tab without sync hears what its device's syncing tab pulled, as
 * 'remote', and the save that lost arrives with its conflict.
 */
import { describe, expect, it } from 'vitest';
import { type SessionChange, type Tabula } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { uniqueUser } from '../../server/helpers.js';
import { freshTabula, waitFor } from '../store/helpers.js';
import { device, startServer } from './helpers.js';

describe('changes that sync brought', () => {
  it('reach this device’s other tabs as remote, and the save that lost reaches them with its conflict', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const [one, two] = [await device(server, alice), await device(server, alice)];
    // A second tab, without sync, on each device's database: it hears what its device's syncing tab pulled.
    const tabs: Tabula[] = [await freshTabula({ name: one.name, userId: alice }), await freshTabula({ name: two.name, userId: alice })];
    const heard: { tab: number; change: SessionChange }[] = [];
    tabs.forEach((tab, index) => tab.subscribe((change) => heard.push({ tab: index, change })));
    const s1 = await one.session('s');
    await one.sync?.flush();
    await two.sync?.flush();
    await waitFor(() => heard.some(({ tab, change }) => tab === 1 && change.origin === 'remote'));
    expect(heard.find(({ tab, change }) => tab === 1 && change.origin === 'remote')?.change).toStrictEqual({
      userId: alice,
      sessionId: 's',
      kinds: ['session.create'],
      origin: 'remote',
    });
    const s2 = await two.session('s');
    await s1.save({ tasks: 'one' });
    await s2.save({ tasks: 'two' });
    const orderOf = async (name: string) => {
      const db = createDb(name);
      const row = await db.sessions.get([alice, 's']);
      db.close();
      return row?.versionOrder ?? '';
    };
    const loser = (await orderOf(one.name)) < (await orderOf(two.name)) ? 0 : 1;
    const [first, second] = loser === 0 ? [one, two] : [two, one];
    await first.sync?.flush();
    await second.sync?.flush();
    for (let round = 0; round < 2; round++) for (const d of [one, two]) await d.sync?.flush();
    await waitFor(() => heard.some(({ change }) => change.conflict !== undefined));
    const conflicts = heard.filter(({ change }) => change.conflict !== undefined);
    expect(conflicts).toHaveLength(1);
    expect(conflicts[0]).toMatchObject({
      tab: loser,
      change: { origin: 'remote', conflict: { version: 1, local: { tasks: loser === 0 ? 'one' : 'two' }, remote: { tasks: loser === 0 ? 'two' : 'one' } } },
    });
    for (const t of [...tabs, one, two]) await t.close();
  });
});
