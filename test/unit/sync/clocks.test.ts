/**
 * Devices whose clocks are wrong (issue 26, items 7–9). Each device corrects
 * its clock by the server's (`X-Tabula-Time`), so a device a year ahead
 * orders its writes at about real time: its clear or restore drops only
 * what was written before it, it wins no last-writer-wins write it should
 * lose, and no session of any device looks changed a year from now. A key
 * from a clock far ahead that reached the server before it checked (data of
 * an older server) is applied, but moves no clock, and a key at the greatest
 * wall time leaves every session writable.
 *
 * Time is frozen (only `Date` is faked) so the order of writes by wall time
 * is exact: a device's skew is `Date.now` running ahead while it opens (it
 * keeps that clock). Devices sync only on flush(), so a device writes
 * without having seen another's latest ops when the test says so.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeOp } from '../../../src/core/index.js';
import type { Tabula } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { skewedDevice, startServer, startServerWithStore, viaServer } from './helpers.js';

const YEAR = 365 * 24 * 3_600_000;
const T0 = Date.UTC(2026, 0, 15, 12);

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'], now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const contents = async (tabula: Tabula, sessionId: string) => (await (await tabula.session(sessionId)).messages()).map((m) => m.content);
const flush = async (...devices: Tabula[]) => {
  for (const device of devices) await device.sync?.flush();
};

describe('sync: a device whose clock runs a year ahead', () => {
  it('clears only what was written before its clear: two messages written 20 ms after it survive on every device (item 7)', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const ahead = await skewedDevice(viaServer(server), alice, YEAR);
    const right = await skewedDevice(viaServer(server), alice, 0);
    await flush(ahead, right);
    await (await right.session('chat')).append({ role: 'user', content: 'before the clear' });
    await flush(right, ahead);

    await (await ahead.session('chat')).clearContext();
    await flush(ahead);
    vi.setSystemTime(T0 + 20);
    // Written after the clear, on a device that has not seen it yet: they are shown, and must stay.
    await (await right.session('chat')).append([
      { role: 'user', content: 'after 1' },
      { role: 'assistant', content: 'after 2' },
    ]);
    expect(await contents(right, 'chat')).toEqual(['before the clear', 'after 1', 'after 2']);
    await flush(right, ahead);
    const fresh = await skewedDevice(viaServer(server), alice, 0);
    await flush(fresh);
    for (const device of [ahead, right, fresh]) expect(await contents(device, 'chat')).toEqual(['after 1', 'after 2']);
    for (const device of [ahead, right, fresh]) {
      expect(device.reported).toEqual([]);
      await device.close();
    }
  });

  it('wins no write made after its own, drags no other clock ahead, and no device lists a session as changed in the future (item 8)', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const ahead = await skewedDevice(viaServer(server), alice, YEAR);
    const right = await skewedDevice(viaServer(server), alice, 0);
    await flush(ahead, right);
    await (await ahead.session('shared')).memory().set('k', 'written first, on the clock a year ahead');
    await flush(ahead);

    vi.setSystemTime(T0 + 20);
    // Written later, by every clock that is right, on a device that has not seen the other write: it wins everywhere.
    await (await right.session('shared')).memory().set('k', 'written last');
    await flush(right);
    // The device has pulled the other's op now; its next writes, in that session and in another, are ordered now.
    await (await right.session('shared')).note('after the pull');
    await (await right.session('elsewhere')).append({ role: 'user', content: 'later, elsewhere' });
    await flush(right, ahead);
    const fresh = await skewedDevice(viaServer(server), alice, 0);
    await flush(fresh);
    for (const device of [ahead, right, fresh]) {
      expect(await (await device.session('shared')).memory().get('k')).toBe('written last');
      for (const info of await device.sessions()) expect(info.updatedAt, `${info.sessionId} updatedAt`).toBeLessThanOrEqual(T0 + 60_000);
      expect(device.reported).toEqual([]);
    }
    for (const device of [ahead, right, fresh]) await device.close();
  });
});

describe('sync: a key at the greatest wall time, stored before the server checked clocks', () => {
  it('is applied, and every session stays writable on the device that pulled it and on one that joins later (item 9)', { timeout: 60_000 }, async () => {
    const { server, store } = startServerWithStore();
    const alice = uniqueUser('alice');
    const first = await skewedDevice(viaServer(server), alice, 0);
    await flush(first);
    await (await first.session('chat')).append({ role: 'user', content: 'first' });
    await flush(first);
    // As an older server stored it: an op of the session's first life at the last wall time a key can hold.
    const legacy = makeOp('message.append', {
      id: 'from-the-far-future',
      userId: alice,
      sessionId: 'chat',
      order: '999999999999999.ffffff.zzzz',
      after: '',
      body: { id: 'far-future', createdAt: T0, status: 'complete', message: { role: 'assistant', content: 'from the far future' } },
    });
    expect(await store.push(alice, 'legacy', [{ seq: 1, op: legacy }])).toMatchObject({ status: 'applied' });
    await flush(first);
    expect(await contents(first, 'chat')).toEqual(['first', 'from the far future']);

    await (await first.session('chat')).append({ role: 'user', content: 'second' });
    await (await first.session('other')).append({ role: 'user', content: 'elsewhere' });
    await flush(first);
    expect(first.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    const later = await skewedDevice(viaServer(server), alice, 0);
    await flush(later);
    await (await later.session('chat')).append({ role: 'user', content: 'third' });
    await flush(later, first);
    expect(later.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    for (const device of [first, later]) {
      // Ordered by the clock, before the key no clock can pass.
      expect(await contents(device, 'chat')).toEqual(['first', 'second', 'third', 'from the far future']);
      expect(await contents(device, 'other')).toEqual(['elsewhere']);
      expect(device.reported).toEqual([]);
      await device.close();
    }
  });
});
