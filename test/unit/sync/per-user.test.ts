/**
 * Sync state per (profile, user) (issue 26, item 5). Two users taking turns
 * on one browser profile shared one cursor, seq counter, client id and
 * outbox: Bob started from Alice's cursor and never got his own data, his
 * pushes failed with `sync/gap` (the server numbers pushes per user and
 * client), Alice's unsent rows at the head of the outbox made both users'
 * pushes fail with `sync/forbidden`, and her board rows (which named no user)
 * went out with Bob's token into Bob's account. Now each user's state and
 * rows are their own, a row is pushed only with its own user's token, and a
 * database of the shared-state layout upgrades in place.
 */
import { randomUUID } from 'node:crypto';
import { Dexie } from 'dexie';
import { toBase64 } from 'lib0/buffer';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { makeOp, type Op } from '../../../src/core/index.js';
import type { Tabula } from '../../../src/index.js';
import { BLACKBOARD_MAP } from '../../../src/blackboard/validate.js';
import type { SyncServer } from '../../../src/server/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { syncNames } from '../../../src/store/replication/keys.js';
import { call, noteOp, orderKey, tokenFor, uniqueUser } from '../../server/helpers.js';
import { uniqueName } from '../store/helpers.js';
import { device, startServer, viaServer } from './helpers.js';

/** Everything the server holds for `user`, as the text of its pull answers. */
async function serverText(server: SyncServer, user: string): Promise<string> {
  const token = await tokenFor(user);
  let cursor: string | null = null;
  let text = '';
  for (;;) {
    const response = await server.fetch(new Request('http://sync.test/v1/pull', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ cursor }) }));
    const body = await response.text();
    text += body;
    const page = JSON.parse(body) as { cursor: string | null; more: boolean; items: { board?: { update: string } }[] };
    // Board updates travel base64: decode them, so their text can be searched too.
    for (const item of page.items) if (item.board) text += Buffer.from(item.board.update, 'base64').toString('latin1');
    cursor = page.cursor;
    if (!page.more) return text;
  }
}

/** Sessions, messages and board of every session a device shows. */
async function contents(tabula: Tabula) {
  const out: Record<string, { messages: string[]; board: unknown }> = {};
  for (const info of await tabula.sessions()) {
    const session = await tabula.session(info.sessionId);
    await session.blackboard.whenLoaded;
    out[info.sessionId] = { messages: (await session.messages()).map((m) => m.content as string), board: session.blackboard.toJSON() };
  }
  return out;
}

async function freshContents(server: SyncServer, user: string) {
  const fresh = await device(server, user);
  await fresh.sync?.flush();
  const seen = await contents(fresh);
  await fresh.close();
  return seen;
}

async function write(tabula: Tabula, sessionId: string, text: string): Promise<void> {
  const session = await tabula.session(sessionId);
  await session.append({ role: 'user', content: text });
  await session.blackboard.whenLoaded;
  session.blackboard.set(text, true);
  await session.blackboard.flushed();
}

type Unsent = 'nothing' | 'a board change' | 'messages and a board change';

describe('httpSync: two users taking turns on one profile', () => {
  it.each<Unsent>(['nothing', 'a board change', 'messages and a board change'])(
    'each syncs their own data from their own cursor, seq and client id; nothing of one reaches the other (Alice leaves %s unsent)',
    { timeout: 60_000 },
    async (unsent) => {
      const server = startServer();
      const [alice, bob] = [uniqueUser('alice'), uniqueUser('bob')];
      const bobPhone = await device(server, bob);
      await write(bobPhone, 'bob-chat', 'bob-from-phone');
      await bobPhone.sync?.flush();

      const profile = uniqueName('shared-profile');
      let online = true;
      const flaky: typeof fetch = (input, init) => (online ? viaServer(server)(input, init) : Promise.reject(new TypeError('fetch failed')));
      const asAlice = await device(server, alice, flaky, profile);
      await write(asAlice, 'alice-chat', 'alice-synced');
      await asAlice.sync?.flush();
      const expectedOfAlice = { messages: ['alice-synced'], board: { 'alice-synced': true } as Record<string, boolean> };
      if (unsent !== 'nothing') {
        // Offline, Alice writes more: her rows wait in the outbox when she signs out.
        online = false;
        const chat = await asAlice.session('alice-chat');
        if (unsent === 'messages and a board change') {
          await chat.append({ role: 'user', content: 'alice-unsent' });
          expectedOfAlice.messages.push('alice-unsent');
        }
        chat.blackboard.set('alice-unsent', true);
        await chat.blackboard.flushed();
        expectedOfAlice.board['alice-unsent'] = true;
        await expect(asAlice.sync?.flush()).rejects.toMatchObject({ code: 'sync/offline' });
      }
      await asAlice.close();
      online = true;

      const asBob = await device(server, bob, flaky, profile);
      await asBob.sync?.flush();
      expect(await contents(asBob)).toEqual({ 'bob-chat': { messages: ['bob-from-phone'], board: { 'bob-from-phone': true } } });
      await write(asBob, 'bob-chat', 'bob-on-shared');
      await asBob.sync?.flush();
      expect(asBob.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
      await asBob.close();

      const asAliceAgain = await device(server, alice, flaky, profile);
      await asAliceAgain.sync?.flush();
      expect(asAliceAgain.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
      expect(await contents(asAliceAgain)).toEqual({ 'alice-chat': expectedOfAlice });
      await asAliceAgain.close();

      expect(await freshContents(server, bob)).toEqual({ 'bob-chat': { messages: ['bob-from-phone', 'bob-on-shared'], board: { 'bob-from-phone': true, 'bob-on-shared': true } } });
      expect(await freshContents(server, alice)).toEqual({ 'alice-chat': expectedOfAlice });
      const [ofBob, ofAlice] = [await serverText(server, bob), await serverText(server, alice)];
      for (const secret of ['alice-synced', 'alice-unsent', 'alice-chat']) expect(ofBob).not.toContain(secret);
      for (const secret of ['bob-from-phone', 'bob-on-shared', 'bob-chat']) expect(ofAlice).not.toContain(secret);
      await bobPhone.close();
    },
  );
});

/** The stores of schema version 4, verbatim, as a v4 build of Tabula declared them: one outbox numbering for the profile. */
const STORES_V4 = {
  sessions: '[userId+sessionId], [userId+updatedAt]',
  messages: '[userId+sessionId+id], [userId+sessionId+order], [userId+sessionId+streaming]',
  journal: 'id, [userId+sessionId+order]',
  notes: 'id, [userId+sessionId+order]',
  memory: '[userId+sessionId+scope+key], [userId+sessionId+scope]',
  runs: 'runId, [userId+sessionId+scope], [userId+sessionId+status]',
  checkpoints: 'id, [userId+sessionId]',
  outbox: '++seq',
  meta: 'key',
};

/** A database as a v4 build left it: these outbox rows and meta rows, nothing else. */
async function writeV4(name: string, outbox: readonly object[], meta: readonly { key: string; value: unknown }[]): Promise<void> {
  const v4 = new Dexie(name);
  v4.version(4).stores(STORES_V4);
  await v4.open();
  await v4.table('outbox').bulkAdd([...outbox]);
  await v4.table('meta').bulkPut([...meta]);
  v4.close();
}

const createOp = (userId: string, sessionId: string): Op => makeOp('session.create', { id: randomUUID(), userId, sessionId, order: orderKey(0), body: { createdAt: 1, forkOf: null } });

/** A board update (base64) that sets `key` on a blackboard. */
function boardUpdate(key: string): string {
  const doc = new Y.Doc();
  doc.getMap(BLACKBOARD_MAP).set(key, true);
  return toBase64(Y.encodeStateAsUpdate(doc));
}

/** The notes and board a fresh device of `user` shows of `sessionId`. */
async function freshNotesAndBoard(server: SyncServer, user: string, sessionId: string) {
  const fresh = await device(server, user);
  await fresh.sync?.flush();
  const session = await fresh.session(sessionId);
  await session.blackboard.whenLoaded;
  const seen = { notes: (await session.notes()).map((note) => note.text), board: session.blackboard.toJSON() };
  await fresh.close();
  return seen;
}

describe('a database of the shared-state layout (schema v4) upgrades in place', () => {
  it('one user synced there: the state and every row, board rows included, stay that user’s, and pushing goes on where it was', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const clientId = 'legacyclient1';
    const ops = [createOp(alice, 'old-chat'), noteOp(alice, 'old-chat', 1, 'pushed before'), noteOp(alice, 'old-chat', 2, 'queued before')];
    // The v4 build pushed seqs 1 and 2 under its client id, and pulled them back; seq 3 and a board row wait.
    const pushed = await call(server, '/v1/push', { clientId, items: ops.slice(0, 2).map((op, i) => ({ seq: i + 1, op })) }, await tokenFor(alice));
    expect(pushed.status).toBe(200);
    const pulled = await call(server, '/v1/pull', { cursor: null }, await tokenFor(alice));
    const name = uniqueName('v4-one-user');
    const board = { sessionId: 'old-chat', update: boardUpdate('queued board') };
    await writeV4(
      name,
      [
        { seq: 3, op: ops[2] },
        { seq: 4, board },
      ],
      [
        { key: 'sync:seeded:' + alice, value: true },
        { key: 'sync:clientId', value: clientId },
        { key: 'sync:seq', value: 4 },
        { key: 'sync:cursor', value: pulled.json.cursor },
      ],
    );

    const db = createDb(name);
    await db.open();
    expect(await db.outbox.toArray()).toEqual([
      { seq: 3, userId: alice, op: ops[2] },
      { seq: 4, userId: alice, board },
    ]);
    expect(await db.meta.bulkGet([syncNames.seq(alice), syncNames.clientId(alice), syncNames.cursor(alice), 'sync:seq', 'sync:clientId', 'sync:cursor'])).toEqual([
      { key: syncNames.seq(alice), value: 4 },
      { key: syncNames.clientId(alice), value: clientId },
      { key: syncNames.cursor(alice), value: pulled.json.cursor },
      undefined,
      undefined,
      undefined,
    ]);
    db.close();

    const upgraded = await device(server, alice, viaServer(server), name);
    await upgraded.sync?.flush();
    expect(upgraded.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
    await (await upgraded.session('old-chat')).note('written after the upgrade');
    await upgraded.sync?.flush();
    expect(upgraded.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
    await upgraded.close();
    expect(await freshNotesAndBoard(server, alice, 'old-chat')).toEqual({ notes: ['pushed before', 'queued before', 'written after the upgrade'], board: { 'queued board': true } });
  });

  it('several users synced there: each starts afresh with their own rows, numbered from 1; board rows, which named nobody, are queued again from the boards', { timeout: 60_000 }, async () => {
    const server = startServer();
    const [alice, bob] = [uniqueUser('alice'), uniqueUser('bob')];
    const [aliceOps, bobOps] = [alice, bob].map((user) => [createOp(user, `${user}-chat`), noteOp(user, `${user}-chat`, 1, `${user} queued`)]) as [Op[], Op[]];
    const name = uniqueName('v4-two-users');
    await writeV4(
      name,
      [
        { seq: 1, op: aliceOps[0] },
        { seq: 2, op: bobOps[0] },
        { seq: 3, op: aliceOps[1] },
        { seq: 4, board: { sessionId: `${alice}-chat`, update: boardUpdate('whose?') } },
        { seq: 5, op: bobOps[1] },
      ],
      [
        { key: 'sync:seeded:' + alice, value: true },
        { key: 'sync:seeded:' + bob, value: true },
        { key: 'sync:clientId', value: 'sharedclient' },
        { key: 'sync:seq', value: 5 },
        { key: 'sync:cursor', value: '12' },
        { key: `sync:board:${JSON.stringify([alice, `${alice}-chat`])}`, value: 'AAA=' },
      ],
    );

    const db = createDb(name);
    await db.open();
    expect((await db.outbox.toArray()).map((row) => [row.userId, row.seq, row.op?.id])).toEqual(
      [
        [alice, 1, aliceOps[0]?.id],
        [alice, 2, aliceOps[1]?.id],
        [bob, 1, bobOps[0]?.id],
        [bob, 2, bobOps[1]?.id],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
    const keys = (await db.meta.toCollection().primaryKeys()).sort();
    expect(keys).toEqual([syncNames.seeded(alice), syncNames.seeded(bob), syncNames.seq(alice), syncNames.seq(bob)].sort());
    expect(await db.meta.bulkGet([syncNames.seq(alice), syncNames.seq(bob)])).toEqual([
      { key: syncNames.seq(alice), value: 2 },
      { key: syncNames.seq(bob), value: 2 },
    ]);
    db.close();

    for (const user of [bob, alice]) {
      const upgraded = await device(server, user, viaServer(server), name);
      await upgraded.sync?.flush();
      expect(upgraded.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
      await upgraded.close();
      expect(await freshNotesAndBoard(server, user, `${user}-chat`)).toEqual({ notes: [`${user} queued`], board: {} });
    }
    expect(await serverText(server, bob)).not.toContain(alice);
  });
});
