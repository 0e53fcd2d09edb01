/**
 * Sign-in adopts local work (issue 26, item 5): a profile opened before
 * sign-in writes under a guest user (the default `'anonymous'`); after
 * sign-in, `tabula.adopt('anonymous')` moves those sessions to the signed-in
 * user, whole, so they sync under that account and reach the user's other
 * devices, and the guest is left with nothing. A session whose id the user
 * already has is not merged: it stays the guest's.
 */
import { describe, expect, it } from 'vitest';
import { PrefixContext, type Tabula } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { freshTabula, uniqueName } from '../store/helpers.js';
import { device, startServer, viaServer } from './helpers.js';

/** Everything the public API shows of a session, but the user it belongs to. */
async function view(tabula: Tabula, sessionId: string, userId?: string) {
  const session = await tabula.session(sessionId, userId === undefined ? {} : { userId });
  const { updatedAt: _updatedAt, ...state } = await session.state();
  await session.blackboard.whenLoaded;
  return {
    messages: (await session.messages()).map((m) => [m.id, m.role, m.content, m.status]),
    prefix: (await session.prefix()).systemPrompt,
    state,
    journal: await session.journal.view(),
    pending: await session.journal.diff(),
    notes: (await session.notes()).map((n) => n.text),
    memory: await session.memory('prefs').get('seat'),
    checkpoints: (await session.checkpoints()).map((c) => [c.id, c.label]),
    board: session.blackboard.toJSON(),
  };
}

describe('tabula.adopt(): sign-in adopts the guest’s work', () => {
  it('moves the guest’s sessions, whole, to the signed-in user: they sync under that account, and the guest has none left', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const name = uniqueName('profile');
    const guest = await freshTabula({ name });
    const trip = await guest.session('trip');
    await trip.setPrefix(new PrefixContext({ systemPrompt: 'plan trips' }));
    await trip.append([{ role: 'user', content: 'A weekend in Lyon' }, { role: 'assistant', content: 'Museums and food.' }]);
    await trip.checkpoint('first plan');
    await trip.save({ summary: 'Lyon', tasks: ['book'] });
    await trip.journal.apply([1, 2]);
    await trip.journal.markCommitted();
    await trip.journal.apply([3]);
    await trip.note('prefers trains');
    await trip.memory('prefs').set('seat', 'window');
    await trip.blackboard.whenLoaded;
    trip.blackboard.set('plan', ['museums', 'market']);
    await trip.blackboard.flushed();
    await (await guest.session('todo')).append({ role: 'user', content: 'pack' });
    const before = { trip: await view(guest, 'trip'), todo: await view(guest, 'todo') };
    await guest.close();

    const signedIn = await device(server, alice, viaServer(server), name);
    await signedIn.sync?.flush();
    expect(await signedIn.adopt('anonymous')).toEqual({ adopted: ['todo', 'trip'], kept: [] });
    expect((await signedIn.sessions()).map((s) => s.sessionId).sort()).toEqual(['todo', 'trip']);
    expect(await signedIn.sessions({ userId: 'anonymous' })).toEqual([]);
    expect({ trip: await view(signedIn, 'trip'), todo: await view(signedIn, 'todo') }).toEqual(before);
    await signedIn.sync?.flush();
    expect(signedIn.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });

    const phone = await device(server, alice);
    await phone.sync?.flush();
    expect({ trip: await view(phone, 'trip'), todo: await view(phone, 'todo') }).toEqual(before);
    // Nothing is left to adopt: a second call moves nothing.
    expect(await signedIn.adopt('anonymous')).toEqual({ adopted: [], kept: [] });
    await signedIn.close();
    await phone.close();
  });

  it('a session whose id the signed-in user already has stays the guest’s, untouched', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const laptop = await device(server, alice);
    await (await laptop.session('chat')).append({ role: 'user', content: 'alice’s own' });
    await laptop.sync?.flush();

    const name = uniqueName('profile');
    const guest = await freshTabula({ name });
    await (await guest.session('chat')).append({ role: 'user', content: 'the guest’s' });
    await (await guest.session('other')).append({ role: 'user', content: 'free to move' });
    await guest.close();
    const signedIn = await device(server, alice, viaServer(server), name);
    // Pulled first, so the user's sessions are known here.
    await signedIn.sync?.flush();
    expect(await signedIn.adopt('anonymous')).toEqual({ adopted: ['other'], kept: ['chat'] });
    expect((await (await signedIn.session('chat')).messages()).map((m) => m.content)).toEqual(['alice’s own']);
    expect((await (await signedIn.session('chat', { userId: 'anonymous' })).messages()).map((m) => m.content)).toEqual(['the guest’s']);
    await expect(signedIn.adopt(alice)).rejects.toMatchObject({ code: 'argument/invalid' });
    await signedIn.close();
    await laptop.close();
  });
});
