/**
 * A checkpoint of a long chat syncs (issue 26, "Size"): it used to be one
 * `checkpoint.create` op holding the whole snapshot, refused with
 * `sync/too-large` as it was written once over the server's body limit
 * (2,000 messages of about 1 KB). Now it is written as its head and
 * `checkpoint.part` ops, each under `MAX_OP_BYTES`, and so is a checkpoint
 * a device queues when it first syncs (seeding). Only a checkpoint holding
 * a message that alone is over the limit is refused, naming the message.
 */
import { describe, expect, it } from 'vitest';
import { ApproxTokenCounter } from '../../../src/core/index.js';
import { openTabula, type Tabula } from '../../../src/index.js';
import { MAX_OP_BYTES } from '../../../src/store/replication/outbox.js';
import { uniqueUser } from '../../server/helpers.js';
import { uniqueName } from '../store/helpers.js';
import { skewedDevice, startServer, viaServer } from './helpers.js';

const longChat = (n: number) => Array.from({ length: n }, (_, i) => ({ role: i % 2 === 0 ? ('user' as const) : ('assistant' as const), content: `message ${i} ${'x'.repeat(1000)}` }));
const texts = async (tabula: Tabula, sessionId: string) => (await (await tabula.session(sessionId)).messages()).map((m) => m.content);

describe('sync: a checkpoint over the size of one op', () => {
  it('a checkpoint of a 2,000-message chat syncs to a second device, which lists it and restores every message', { timeout: 120_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const phone = await skewedDevice(viaServer(server), alice, 0);
    const chat = await phone.session('long');
    await chat.append(longChat(2000));
    const checkpoint = await chat.checkpoint('before the cut');
    expect(await chat.checkpoints()).toEqual([checkpoint]);
    await chat.clearContext();
    await chat.append({ role: 'user', content: 'after the clear' });
    await phone.sync?.flush();
    expect(phone.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });

    const laptop = await skewedDevice(viaServer(server), alice, 0);
    await laptop.sync?.flush();
    const there = await laptop.session('long');
    expect(await there.checkpoints()).toEqual([checkpoint]);
    await there.restore(checkpoint.id);
    expect(await texts(laptop, 'long')).toEqual(longChat(2000).map((m) => m.content));
    // The restore syncs back: the phone has every message again too.
    await laptop.sync?.flush();
    await phone.sync?.flush();
    expect(await texts(phone, 'long')).toEqual(longChat(2000).map((m) => m.content));
    await phone.close();
    await laptop.close();
  });

  it('a long chat checkpointed with sync off is split when the device first syncs, and arrives whole', { timeout: 120_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('offline');
    const offline = await openTabula({ name, userId: alice, tokenCounter: new ApproxTokenCounter() });
    const chat = await offline.session('long');
    await chat.append(longChat(2000));
    const checkpoint = await chat.checkpoint();
    await offline.close();
    const phone = await skewedDevice(viaServer(server), alice, 0, name);
    await phone.sync?.flush();
    expect(phone.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    const laptop = await skewedDevice(viaServer(server), alice, 0);
    await laptop.sync?.flush();
    const there = await laptop.session('long');
    expect(await there.checkpoints()).toEqual([checkpoint]);
    await there.clearContext();
    await there.restore(checkpoint.id);
    expect(await there.messageCount()).toBe(2000);
    await phone.close();
    await laptop.close();
  });

  it('a checkpoint holding one message over the limit is refused as it is written, naming the message', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('offline');
    // Written with sync off (no limit applies then), as its append would have been refused with sync on.
    const offline = await openTabula({ name, userId: alice, tokenCounter: new ApproxTokenCounter() });
    const chat = await offline.session('chat');
    await chat.append({ role: 'user', content: 'small' });
    const [big] = await chat.append({ role: 'user', content: 'z'.repeat(MAX_OP_BYTES) });
    await offline.close();
    const phone = await skewedDevice(viaServer(server), alice, 0, name);
    const synced = await phone.session('chat');
    await expect(synced.checkpoint('too big')).rejects.toMatchObject({
      code: 'sync/too-large',
      message: expect.stringContaining(`message "${big?.id}"`) as unknown,
    });
    expect(await synced.checkpoints()).toEqual([]);
    await phone.close();
  });
});
