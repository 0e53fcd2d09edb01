/**
 * Ops too large for the server, and ops it refuses (issue 26, item 11). One
 * op over the server's body limit used to block the outbox for good: refused
 * on every retry, nothing after it synced, and the app had no way out. Now a
 * synced write whose op would be over the limit (`MAX_OP_BYTES`, the
 * default `maxBodyBytes` less the envelope) fails as it is written, with
 * `sync/too-large` naming the field, and lands nothing; and an item the
 * server refuses anyway (a server with smaller limits, a board update over
 * `maxUpdateBytes`, an op ordered too far ahead) is parked: kept, never
 * pushed again, listed in `status().parked` and reported to onError, while
 * everything behind it syncs, until the app drops it.
 */
import { describe, expect, it } from 'vitest';
import type { Tabula } from '../../../src/index.js';
import { MAX_OP_BYTES } from '../../../src/store/replication/outbox.js';
import { DEFAULT_SYNC_LIMITS, maxOpBytes } from '../../../src/sync/protocol.js';
import { uniqueUser } from '../../server/helpers.js';
import { skewedDevice, startServer, startServerWithStore, viaServer } from './helpers.js';

const contents = async (tabula: Tabula, sessionId: string) => (await (await tabula.session(sessionId)).messages()).map((m) => (typeof m.content === 'string' ? m.content.slice(0, 40) : m.content));
const codeOf = (error: unknown) => (error as { code?: string }).code;

describe('sync: an op over the server’s body limit', () => {
  it('the store’s limit is the server’s default body limit less the envelope', () => {
    expect(MAX_OP_BYTES).toBe(maxOpBytes(DEFAULT_SYNC_LIMITS));
  });

  it('a message holding a 1.5 MB data-URL image is refused as it is written, naming the field; the writes after it sync (item 11)', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const phone = await skewedDevice(viaServer(server), alice, 0);
    const chat = await phone.session('chat');
    await chat.append({ role: 'user', content: 'look at this' });
    const image = `data:image/png;base64,${'A'.repeat(1_500_000)}`;
    const refused = chat.append({ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }] } as never);
    await expect(refused).rejects.toMatchObject({ code: 'sync/too-large', message: expect.stringMatching(/message\.append.*body\.message/) as unknown });
    // Nothing of it landed: not here, not in the outbox.
    expect(await contents(phone, 'chat')).toEqual(['look at this']);
    await chat.append({ role: 'assistant', content: 'what did you send?' });
    await phone.sync?.flush();
    expect(phone.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    const laptop = await skewedDevice(viaServer(server), alice, 0);
    await laptop.sync?.flush();
    expect(await contents(laptop, 'chat')).toEqual(['look at this', 'what did you send?']);
    await phone.close();
    await laptop.close();
  });
});

describe('sync: imports', () => {
  it('an export of a long chat imports (one op per message) and syncs; one holding a message over the limit is refused whole (item 11)', { timeout: 90_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const phone = await skewedDevice(viaServer(server), alice, 0);
    const long = await phone.session('long');
    await long.append(Array.from({ length: 1500 }, (_, i) => ({ role: 'user' as const, content: `line ${i} ${'x'.repeat(1000)}` })));
    const file = await long.export();
    await phone.importSession({ ...file, sessionId: 'copy' });
    const tooBig = { ...file, sessionId: 'too-big', messages: [...file.messages.slice(0, 2), { ...file.messages[2]!, message: { role: 'user' as const, content: 'z'.repeat(MAX_OP_BYTES) } }] };
    await expect(phone.importSession(tooBig)).rejects.toMatchObject({ code: 'sync/too-large', message: expect.stringContaining('body.message') as unknown });
    expect((await phone.sessions()).map((info) => info.sessionId).sort()).toEqual(['copy', 'long']);
    await phone.sync?.flush();
    expect(phone.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    const laptop = await skewedDevice(viaServer(server), alice, 0);
    await laptop.sync?.flush();
    expect(await (await laptop.session('copy')).messageCount()).toBe(1500);
    await phone.close();
    await laptop.close();
  });
});

describe('sync: a streamed reply that grows past the size limit', () => {
  it('ends as written (done() resolves, the message is complete here); its final update is parked, and the writes after it sync', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const phone = await skewedDevice(viaServer(server), alice, 0);
    const chat = await phone.session('chat');
    const stream = await chat.stream({ role: 'assistant' });
    for (let i = 0; i < 12; i++) stream.write('w'.repeat(100_000));
    const [reply] = await stream.done().then(async () => chat.messages());
    expect(reply).toMatchObject({ status: 'complete' });
    await chat.append({ role: 'user', content: 'after the long reply' });
    await phone.sync?.flush();
    expect(phone.sync?.status().parked.map((item) => [item.kind, item.messageId, item.reason.code])).toEqual([['message.update', reply?.id, 'sync/too-large']]);
    const laptop = await skewedDevice(viaServer(server), alice, 0);
    await laptop.sync?.flush();
    expect(await contents(laptop, 'chat')).toEqual(['after the long reply']);
    await phone.close();
    await laptop.close();
  });
});

describe('sync: an item the server refuses is parked, and nothing waits behind it', () => {
  it('an op over a smaller server’s limit and a board update over its maxUpdateBytes are parked and reported; the rest syncs; dropParked forgets them (item 11)', { timeout: 60_000 }, async () => {
    const { server } = startServerWithStore({}, { maxBodyBytes: 64 * 1024, maxUpdateBytes: 4096 });
    const alice = uniqueUser('alice');
    const phone = await skewedDevice(viaServer(server), alice, 0);
    const chat = await phone.session('chat');
    await chat.append({ role: 'user', content: 'first' });
    await chat.append({ role: 'user', content: `large ${'y'.repeat(100_000)}` });
    await chat.blackboard.whenLoaded;
    chat.blackboard.set('big', 'z'.repeat(10_000));
    await chat.blackboard.flushed();
    await chat.append({ role: 'user', content: 'after it' });
    await phone.sync?.flush();
    const status = phone.sync?.status();
    expect(status).toMatchObject({ state: 'idle', pending: 0 });
    expect(status?.parked.map((item) => [item.kind, item.sessionId, item.reason.code])).toEqual([
      ['message.append', 'chat', 'sync/too-large'],
      ['board', 'chat', 'sync/too-large'],
    ]);
    expect(phone.reported.map(codeOf)).toEqual(['sync/too-large', 'sync/too-large']);
    expect(String(phone.reported[0])).toContain('dropParked');
    const laptop = await skewedDevice(viaServer(server), alice, 0);
    await laptop.sync?.flush();
    // Everything but the parked items reached the other device; the parked message stays on the phone.
    expect(await contents(laptop, 'chat')).toEqual(['first', 'after it']);
    expect(await contents(phone, 'chat')).toEqual(['first', `large ${'y'.repeat(34)}`, 'after it']);
    // A write after the park goes on with the next seq, and syncs.
    await chat.note('later');
    await phone.sync?.flush();
    await laptop.sync?.flush();
    expect((await (await laptop.session('chat')).notes()).map((n) => n.text)).toEqual(['later']);

    // Kept across a reopen, until dropped.
    await phone.close();
    const again = await skewedDevice(viaServer(server), alice, 0, phone.name);
    await again.sync?.flush();
    const parked = again.sync?.status().parked ?? [];
    expect(parked).toHaveLength(2);
    expect(await again.sync?.dropParked(parked[0]!.id)).toBe(true);
    expect(await again.sync?.dropParked(parked[0]!.id)).toBe(false);
    expect(again.sync?.status().parked.map((item) => item.id)).toEqual([parked[1]!.id]);
    expect(await again.sync?.dropParked(parked[1]!.id)).toBe(true);
    await again.sync?.flush();
    expect(again.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    await again.close();
    await laptop.close();
  });

  it('ops written offline on a clock a year ahead, before the device ever corrected it, are parked; its later writes sync, and a re-import sends the parked session', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    let online = false;
    const via = viaServer(server);
    const phone = await skewedDevice(
      async (input, init) => {
        if (!online) throw new TypeError('offline');
        return via(input, init);
      },
      alice,
      365 * 24 * 3_600_000,
    );
    const chat = await phone.session('chat');
    await chat.append({ role: 'user', content: 'written a year ahead' });
    await expect(phone.sync?.flush()).rejects.toMatchObject({ code: 'sync/offline' });
    online = true;
    await phone.sync?.flush();
    // The create and the message, each refused as ordered past the server's clock: set aside, not in the way.
    const status = phone.sync?.status();
    expect(status).toMatchObject({ state: 'idle', pending: 0 });
    expect(status?.parked.map((item) => [item.kind, item.reason.code])).toEqual([
      ['session.create', 'schema/invalid'],
      ['message.append', 'schema/invalid'],
    ]);
    expect(status?.parked[0]?.reason.message).toContain('op.order');
    // Written on the corrected clock: it syncs.
    await (await phone.session('later')).append({ role: 'user', content: 'written on the corrected clock' });
    await phone.sync?.flush();
    const laptop = await skewedDevice(via, alice, 0);
    await laptop.sync?.flush();
    expect((await laptop.sessions()).map((s) => s.sessionId)).toEqual(['later']);
    expect(await contents(laptop, 'later')).toEqual(['written on the corrected clock']);

    // The way out for the parked session: imported again, it is written anew, on the corrected clock.
    const file = await chat.export();
    await phone.deleteSession('chat');
    await phone.importSession(file);
    for (const item of status?.parked ?? []) await phone.sync?.dropParked(item.id);
    await phone.sync?.flush();
    await laptop.sync?.flush();
    expect(phone.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    expect(await contents(laptop, 'chat')).toEqual(['written a year ahead']);
    await phone.close();
    await laptop.close();
  });
});
