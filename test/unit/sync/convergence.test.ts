/**
 * Divergences the sync fuzz (fuzz.test.ts) found, each as a small
 * deterministic scenario: two devices of one user through a real server,
 * compared through the public API. The wall clock is stubbed to move 1 ms
 * per reading, so every op has its own millisecond and a field that keeps
 * the time of an op shows which ops a replica counted.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Tabula } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { openDevice, serverPool, viaServer } from './helpers.js';

const servers = serverPool();
afterAll(() => servers.close());

beforeEach(() => {
  let now = Date.now();
  vi.spyOn(Date, 'now').mockImplementation(() => (now += 1));
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Two devices of a new user on a new server. */
async function twoDevices(): Promise<[Tabula, Tabula]> {
  const server = servers.start();
  const user = uniqueUser('alice');
  return [await openDevice(user, viaServer(server)), await openDevice(user, viaServer(server))];
}

describe('sync convergence (fuzz regressions)', () => {
  it('a write that changes nothing locally (a second markCommitted) still reaches the other devices, which count it in updatedAt too', async () => {
    const [one, two] = await twoDevices();
    const session = await one.session('s');
    await session.journal.record({ step: 1 });
    await session.journal.markCommitted();
    // Nothing new to commit: the op changes no journal field, but the session counts its time in updatedAt.
    await session.journal.markCommitted();
    await one.sync?.flush();
    await two.sync?.flush();
    const [mine] = await one.sessions();
    expect(await two.sessions()).toEqual([mine]);
    await one.close();
    await two.close();
  });
});
