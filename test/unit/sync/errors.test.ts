/**
 * What a failed sync is reported as. Only a request that got no answer is
 * `sync/offline` (retried quietly, state 'offline'); a store that cannot
 * write a pulled page (a full disk) reports its own storage code, and the
 * app hears of it (state 'error', onError). Before, every error that was not
 * a TabulaError or a refusal of the server (a full disk, a bug) was
 * reported as `sync/offline` and never reached onError.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { httpSync } from '../../../src/sync/index.js';
import { tokenFor, uniqueUser } from '../../server/helpers.js';
import { freshTabula } from '../store/helpers.js';
import { pausedDevice, startServer, viaServer } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** Makes IndexedDB refuse every write to `table` with QuotaExceededError, as a full origin does, until restored. */
function fillQuota(table: string) {
  for (const method of ['put', 'add'] as const) {
    const original = Reflect.get(IDBObjectStore.prototype, method) as (this: IDBObjectStore, ...args: unknown[]) => IDBRequest<IDBValidKey>;
    vi.spyOn(IDBObjectStore.prototype, method).mockImplementation(function (this: IDBObjectStore, ...args: unknown[]) {
      if (this.name === table) throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
      return original.apply(this, args);
    });
  }
}

describe('sync errors keep their condition', () => {
  it('a pulled page the store cannot write (its quota used up) is reported as storage/quota-exceeded, not sync/offline', { timeout: 30_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const laptop = await freshTabula({ userId: alice, sync: httpSync({ url: 'http://sync.test', token: await tokenFor(alice), fetch: viaServer(server), pollIntervalMs: 3_600_000 }) });
    laptop.sync?.pause();
    // The leader's first cycle, started while opening, is over once a flush is.
    await laptop.sync?.flush();
    const phone = await pausedDevice(alice, viaServer(server));
    await (await phone.session('chat')).append({ role: 'user', content: 'from the phone' });
    await phone.sync?.flush();

    fillQuota('messages');
    const failure = await laptop.sync?.flush().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'storage/quota-exceeded' });
    expect(laptop.sync?.status()).toMatchObject({ state: 'error', error: { code: 'storage/quota-exceeded' } });
    expect(laptop.reported).toContainEqual(expect.objectContaining({ code: 'storage/quota-exceeded' }));

    // Nothing of the page landed, and it applies once there is room again.
    vi.restoreAllMocks();
    await laptop.sync?.flush();
    expect((await (await laptop.session('chat')).messages()).map((m) => m.content)).toEqual(['from the phone']);
    await phone.close();
    await laptop.close();
  });

  it('a request that gets no answer is sync/offline, with the network failure as its cause, and is not reported', { timeout: 30_000 }, async () => {
    const down = new TypeError('fetch failed');
    const tabula = await freshTabula({ userId: uniqueUser('alice'), sync: httpSync({ url: 'http://sync.test', token: 't', fetch: () => Promise.reject(down), pollIntervalMs: 3_600_000 }) });
    tabula.sync?.pause();
    await expect(tabula.sync?.flush()).rejects.toMatchObject({ code: 'sync/offline', cause: down });
    expect(tabula.sync?.status()).toMatchObject({ state: 'offline' });
    expect(tabula.reported).toEqual([]);
    await tabula.close();
  });

  it('a token() that throws is sync/unauthorized with its error as the cause: sync waits for a token', { timeout: 30_000 }, async () => {
    const server = startServer();
    const broken = new Error('the token service is down');
    const tabula = await freshTabula({
      userId: uniqueUser('alice'),
      sync: httpSync({
        url: 'http://sync.test',
        token: () => {
          throw broken;
        },
        fetch: viaServer(server),
        pollIntervalMs: 3_600_000,
      }),
    });
    tabula.sync?.pause();
    await expect(tabula.sync?.flush()).rejects.toMatchObject({ code: 'sync/unauthorized', cause: broken });
    expect(tabula.sync?.status()).toMatchObject({ state: 'unauthorized' });
    await tabula.close();
  });
});
