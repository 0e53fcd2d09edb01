/**
 * Data written before sync was turned on: the first open with sync queues
 * it, so another device gets all of it (and it is queued once, not on
 * every open).
 */
import { describe, expect, it } from 'vitest';
import { PrefixContext, type Tabula } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { syncNames } from '../../../src/store/replication/keys.js';
import { uniqueUser } from '../../server/helpers.js';
import { freshTabula, uniqueName } from '../store/helpers.js';
import { device, startServer, viaServer } from './helpers.js';

/** What the public API shows of a session. */
async function view(tabula: Tabula, sessionId: string) {
  const session = await tabula.session(sessionId);
  const memory = session.memory('prefs');
  const { updatedAt: _updatedAt, ...state } = await session.state();
  await session.blackboard.whenLoaded;
  return {
    messages: (await session.messages()).map((m) => [m.id, m.role, m.content, m.status]),
    prefix: (await session.prefix()).systemPrompt,
    state,
    journal: await session.journal.view(),
    pending: await session.journal.diff(),
    notes: (await session.notes()).map((n) => n.text),
    memory: Object.fromEntries(await Promise.all((await memory.keys()).sort().map(async (key) => [key, await memory.get(key)] as const))),
    checkpoints: (await session.checkpoints()).map((c) => c.label),
    board: session.blackboard.toJSON(),
  };
}

describe('httpSync: data written before sync was on', () => {
  it('is queued on the first open with sync and reaches another device whole, once', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('device');
    const offline = await freshTabula({ name, userId: alice });
    const chat = await offline.session('chat');
    await chat.setPrefix(new PrefixContext({ systemPrompt: 'be brief' }));
    await chat.append([{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }]);
    await chat.save({ summary: 'first' });
    await chat.checkpoint('after two');
    await chat.save({ tasks: ['t'] });
    await chat.append({ role: 'user', content: 'three' });
    await chat.journal.apply([1, 2]);
    await chat.journal.markCommitted();
    await chat.journal.apply([3]);
    await chat.note('remember this');
    await chat.memory('prefs').set('kept', { a: 1 });
    await chat.memory('prefs').set('gone', 1);
    await chat.memory('prefs').delete('gone');
    await chat.blackboard.whenLoaded;
    chat.blackboard.set('plan', ['x']);
    await chat.blackboard.flushed();
    await (await offline.session('second')).append({ role: 'user', content: 'another chat' });
    const expected = await view(offline, 'chat');
    await offline.close();

    const online = await device(server, alice, viaServer(server), name);
    await online.sync?.flush();
    const other = await device(server, alice);
    await other.sync?.flush();
    expect(await view(other, 'chat')).toEqual(expected);
    expect((await other.sessions()).map((s) => s.sessionId).sort()).toEqual(['chat', 'second']);
    await online.close();

    // Queued once: opening again queues nothing more (the outbox's seq counter does not move).
    const seqOf = async () => {
      const db = createDb(name);
      const seq = (await db.meta.get(syncNames.seq(alice)))?.value;
      db.close();
      return seq;
    };
    const before = await seqOf();
    expect(before).toBeGreaterThan(10);
    const again = await device(server, alice, viaServer(server), name);
    await again.sync?.flush();
    expect(await seqOf()).toBe(before);
    await again.close();
    await other.close();
  });
});
