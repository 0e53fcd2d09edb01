/**
 * A server whose data is gone behind the same URL (issue 26, item 10): a
 * restore from an empty volume or a new deployment (a new store: a new
 * epoch), or a restore from an older copy (the same epoch, fewer items). A
 * writer used to fail with `sync/gap` forever; a reader stayed `idle`,
 * missed what was pushed after, and dropped ops of sessions whose create it
 * never got. Now each device that finds it out (a new `X-Tabula-Epoch`, a
 * pull cursor past the server's head, a push answered with less than the
 * server acknowledged) queues everything it holds of the user again, under
 * a new client id, and pulls from the start; it is told once, through
 * onError (`sync/gap`), and nothing is doubled.
 */
import { copyFileSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PrefixContext, type SaveConflictInfo, type Tabula } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { replaceableServer, skewedDevice } from './helpers.js';

/** What the public API shows of every session of a device. */
async function view(tabula: Tabula) {
  const out: Record<string, unknown> = {};
  for (const info of (await tabula.sessions()).sort((a, b) => (a.sessionId < b.sessionId ? -1 : 1))) {
    const session = await tabula.session(info.sessionId);
    const memory = session.memory();
    await session.blackboard.whenLoaded;
    out[info.sessionId] = {
      info,
      messages: (await session.messages()).map((m) => [m.id, m.content, m.status]),
      prefix: (await session.prefix()).systemPrompt,
      state: await session.state(),
      journal: await session.journal.view(),
      pending: await session.journal.diff(),
      notes: (await session.notes()).map((n) => [n.id, n.text]),
      memory: Object.fromEntries(await Promise.all((await memory.keys()).sort().map(async (key) => [key, await memory.get(key)] as const))),
      checkpoints: (await session.checkpoints()).map((c) => [c.id, c.label]),
      board: session.blackboard.toJSON(),
    };
  }
  return out;
}

const device = (url: ReturnType<typeof replaceableServer>, user: string) => skewedDevice(url.fetch, user, 0);
const resets = (tabula: Tabula & { reported: Error[] }) => tabula.reported.filter((error) => (error as { code?: string }).code === 'sync/gap');

describe('sync: the server’s data wiped behind the same URL (a new epoch)', () => {
  it('a writer queues everything it holds again and goes on; a fresh device gets all of it, once (item 10)', { timeout: 60_000 }, async () => {
    const url = replaceableServer();
    const alice = uniqueUser('alice');
    const writer = await device(url, alice);
    const chat = await writer.session('chat');
    await chat.setPrefix(new PrefixContext({ systemPrompt: 'be brief' }));
    await chat.append([{ role: 'user', content: 'before the wipe' }, { role: 'assistant', content: 'noted' }]);
    await chat.save({ summary: 'so far' });
    await chat.checkpoint('cp');
    await chat.journal.apply([1]);
    await chat.journal.markCommitted();
    await chat.note('a note');
    await chat.memory().set('lang', 'fr');
    await chat.blackboard.whenLoaded;
    chat.blackboard.set('plan', ['a']);
    await chat.blackboard.flushed();
    await writer.deleteSession('gone');
    await writer.sync?.flush();

    await url.wipe();
    await chat.append({ role: 'user', content: 'after the wipe' });
    await writer.sync?.flush();
    expect(writer.sync?.status()).toMatchObject({ state: 'idle', pending: 0, parked: [] });
    expect(resets(writer)).toHaveLength(1);
    // Again: nothing more to do, and nothing more is said.
    await writer.sync?.flush();
    expect(resets(writer)).toHaveLength(1);

    const fresh = await device(url, alice);
    await fresh.sync?.flush();
    expect(await view(fresh)).toEqual(await view(writer));
    expect((await (await fresh.session('chat')).messages()).map((m) => m.content)).toEqual(['before the wipe', 'noted', 'after the wipe']);
    expect(fresh.reported).toEqual([]);
    await writer.close();
    await fresh.close();
  });

  it('a reader that pulled before the wipe pulls from the start: it misses nothing pushed after it, and its own sessions reach the others (item 10)', { timeout: 60_000 }, async () => {
    const url = replaceableServer();
    const alice = uniqueUser('alice');
    const first = await device(url, alice);
    const old = await first.session('old');
    for (let i = 0; i < 5; i++) await old.append({ role: 'user', content: `old ${i}` });
    await first.sync?.flush();
    const reader = await device(url, alice);
    await reader.sync?.flush();
    expect((await reader.sessions()).map((s) => s.sessionId)).toEqual(['old']);
    await first.close();

    await url.wipe();
    // A new device writes more items to the new server than the reader's cursor counts: a pull from that
    // cursor would skip the session's create and get only its last messages.
    const newcomer = await device(url, alice);
    const fresh = await newcomer.session('new');
    for (let i = 0; i < 12; i++) await fresh.append({ role: 'user', content: `new ${i}` });
    await newcomer.sync?.flush();

    await reader.sync?.flush();
    await newcomer.sync?.flush();
    for (const device of [reader, newcomer]) {
      expect((await device.sessions()).map((s) => s.sessionId).sort()).toEqual(['new', 'old']);
      expect((await (await device.session('new')).messages()).map((m) => m.content)).toEqual(Array.from({ length: 12 }, (_, i) => `new ${i}`));
      expect((await (await device.session('old')).messages()).map((m) => m.content)).toEqual(Array.from({ length: 5 }, (_, i) => `old ${i}`));
    }
    expect(await view(reader)).toEqual(await view(newcomer));
    // Told once; the newcomer, which never synced with the old server, is told nothing.
    expect(resets(reader)).toHaveLength(1);
    expect(newcomer.reported).toEqual([]);
    await reader.close();
    await newcomer.close();
  });

  it('a save queued again after the wipe still names what it was built on: the device whose save it replaces is told', { timeout: 60_000 }, async () => {
    const url = replaceableServer();
    const alice = uniqueUser('alice');
    const [one, two] = [await device(url, alice), await device(url, alice)];
    await one.session('chat');
    await one.sync?.flush();
    await two.sync?.flush();
    // Two saves v1 and v2 and pushes them; one saves its own v1, on nothing, and has not synced since.
    const theirs = await two.session('chat');
    await theirs.save({ tasks: 'two v1' });
    await theirs.save({ tasks: 'two v2' });
    await two.sync?.flush();
    await (await one.session('chat')).save({ tasks: 'one v1' });
    const told: SaveConflictInfo[] = [];
    one.subscribe((change) => {
      if (change.conflict) told.push(change.conflict);
    });

    // The new server gets two's v2 only as two queues it again: it must still say it was built on two's v1.
    await url.wipe();
    await two.sync?.flush();
    await one.sync?.flush();
    expect(await (await one.session('chat')).state()).toMatchObject({ version: 2, tasks: 'two v2' });
    expect(told).toEqual([{ version: 1, local: expect.objectContaining({ tasks: 'one v1' }) as unknown, remote: expect.objectContaining({ tasks: 'two v2' }) as unknown }]);
    await one.close();
    await two.close();
  });
});

describe('sync: the server restored from an older copy (the same epoch, fewer items)', () => {
  it('a writer whose acknowledged items are gone and a reader whose cursor is past the head both start over, and end equal (item 10)', { timeout: 60_000 }, async () => {
    const url = replaceableServer();
    const alice = uniqueUser('alice');
    const writer = await device(url, alice);
    const reader = await device(url, alice);
    await (await writer.session('chat')).append({ role: 'user', content: 'in the copy' });
    await writer.sync?.flush();
    await reader.sync?.flush();
    // The copy: the file and its write-ahead log as they are now.
    const copy = `${url.file()}.copy`;
    copyFileSync(url.file(), copy);
    if (existsSync(`${url.file()}-wal`)) copyFileSync(`${url.file()}-wal`, `${copy}-wal`);
    for (let i = 0; i < 3; i++) await (await writer.session('chat')).append({ role: 'user', content: `not in the copy ${i}` });
    await writer.sync?.flush();
    await reader.sync?.flush();

    await url.restore(copy);
    // The reader asks first: its cursor is past the copy's head. (Once other devices have pushed past it, a
    // cursor no longer tells: docs/guide/server.md says to give a restored copy a new epoch.)
    await reader.sync?.flush();
    await (await writer.session('chat')).append({ role: 'user', content: 'after the restore' });
    // The server answers the writer's push with a seq below what it had acknowledged.
    await writer.sync?.flush();
    await reader.sync?.flush();
    const fresh = await device(url, alice);
    await fresh.sync?.flush();
    const expected = ['in the copy', 'not in the copy 0', 'not in the copy 1', 'not in the copy 2', 'after the restore'];
    for (const device of [writer, reader, fresh]) {
      expect((await (await device.session('chat')).messages()).map((m) => m.content)).toEqual(expected);
      expect(device.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
    }
    expect(await view(reader)).toEqual(await view(fresh));
    expect(await view(writer)).toEqual(await view(fresh));
    expect([resets(writer).length, resets(reader).length]).toEqual([1, 1]);
    for (const device of [writer, reader, fresh]) await device.close();
  });
});
