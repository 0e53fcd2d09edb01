import { describe, expect, it } from 'vitest';
import { WorkingContext, lastTurns, tagged, type SessionChange } from '../../../../src/index.js';
import { freshTabula, nextChange, uniqueName, waitFor } from '../helpers.js';

describe('session messages', () => {
  it('appends durably and returns stored messages with id, order, status and time', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const before = Date.now();
    const [stored] = await session.append({ role: 'user', content: 'hello', name: 'ann' });
    expect(stored).toMatchObject({ role: 'user', content: 'hello', name: 'ann', status: 'complete' });
    expect(stored!.id).toMatch(/^[0-9a-f]{32}$/);
    expect(stored!.order).toMatch(/^\d{15}\.[0-9a-f]{6}\./);
    expect(stored!.createdAt).toBeGreaterThanOrEqual(before);
    expect(Object.isFrozen(stored)).toBe(true);
    expect(await session.messages()).toEqual([stored]);
    await tabula.close();
  });

  it('appends a batch in order, each with a greater order key', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stored = await session.append(Array.from({ length: 20 }, (_, i) => ({ role: 'user' as const, content: `m${i}` })));
    const orders = stored.map((m) => m.order);
    expect([...orders].sort()).toEqual(orders);
    expect(new Set(orders).size).toBe(20);
    expect((await session.messages()).map((m) => m.content)).toEqual(stored.map((m) => m.content));
    expect(await session.messageCount()).toBe(20);
    await tabula.close();
  });

  it('refuses an invalid message, naming it and its field, and writes none of the batch', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await expect(
      session.append([{ role: 'user', content: 'fine' }, { role: 'assistant', content: null }]),
    ).rejects.toThrow(/append\(\) to session "s" of user "anonymous": message\[1\] is not a valid chat message: content/);
    expect(await session.messageCount()).toBe(0);
    await tabula.close();
  });

  it('reads the last N, and scopes over the whole session', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append([
      { role: 'system', content: 'frame' },
      { role: 'user', content: 'u1', name: 'a' },
      { role: 'assistant', content: 'a1' },
      { role: 'user', content: 'u2', name: 'b' },
      { role: 'assistant', content: 'a2' },
    ]);
    expect((await session.messages({ last: 2 })).map((m) => m.content)).toEqual(['u2', 'a2']);
    expect(await session.messages({ last: 0 })).toEqual([]);
    expect((await session.messages({ last: 99 })).length).toBe(5);
    expect((await session.messages({ scope: lastTurns(1) })).map((m) => m.content)).toEqual(['frame', 'u2', 'a2']);
    expect((await session.messages({ scope: tagged('a') })).map((m) => m.content)).toEqual(['u1']);
    expect((await session.messages({ scope: lastTurns(1), last: 1 })).map((m) => m.content)).toEqual(['a2']);
    await expect(session.messages({ last: -1 })).rejects.toMatchObject({ code: 'argument/invalid' });
    await tabula.close();
  });

  it('interleaves appends from two tabs into one order that both see', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('shared');
    const b = await tabB.session('shared');
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).append({ role: 'user', content: `${i % 2 === 0 ? 'A' : 'B'}${i}` })),
    );
    const seenA = await a.messages();
    const seenB = await b.messages();
    expect(seenA).toHaveLength(20);
    expect(seenA.map((m) => m.id)).toEqual(seenB.map((m) => m.id));
    const orders = seenA.map((m) => m.order);
    expect([...orders].sort()).toEqual(orders);
    await tabA.close();
    await tabB.close();
  });

  it('subscribe() fires for changes in this tab and in another tab', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    const seenByA: SessionChange[] = [];
    const seenByB: SessionChange[] = [];
    const stopA = a.subscribe((change) => seenByA.push(change));
    b.subscribe((change) => seenByB.push(change));
    await a.append({ role: 'user', content: 'x' });
    // tabA's session('s') broadcast a session.create that may reach B only after B subscribed.
    const appendsSeenByB = () => seenByB.filter((change) => change.kinds.includes('message.append'));
    await waitFor(() => appendsSeenByB().length > 0);
    expect(seenByA).toEqual([{ userId: 'anonymous', sessionId: 's', kinds: ['message.append'], origin: 'local' }]);
    expect(appendsSeenByB()).toEqual([{ userId: 'anonymous', sessionId: 's', kinds: ['message.append'], origin: 'tab' }]);
    expect(seenByB.every((change) => change.origin === 'tab')).toBe(true);
    stopA();
    // A listener still subscribed in tab A hears the save: by then the stopped one would have too.
    const saveReachedA = new Promise<void>((resolve) => a.subscribe((change) => change.kinds.includes('state.save') && resolve()));
    await b.save({ summary: 'y' });
    await saveReachedA;
    expect(seenByA).toHaveLength(1);
    await tabA.close();
    await tabB.close();
  });

  it('reports and ignores a malformed message from another tab', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    const seen: SessionChange[] = [];
    session.subscribe((change) => seen.push(change));
    const rogue = new BroadcastChannel(`tabula:${name}:changes`);
    rogue.postMessage({ v: 1, userId: 'anonymous', sessionId: 's', kinds: 'not-a-list' });
    await waitFor(() => tabula.reported.length > 0);
    rogue.close();
    expect(tabula.reported[0]?.message).toMatch(/malformed change message from another tab/);
    expect(seen).toEqual([]);
    await tabula.close();
  });
});

describe('copies and round trips of messages (issue 10 #14)', () => {
  it('fork, checkpoint and export mid-stream copy the streaming message as interrupted, text so far kept', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
    const flushed = nextChange(session, 'message.update');
    stream.write('half');
    await flushed;
    const fork = await session.fork('copy');
    const checkpoint = await session.checkpoint();
    expect((await session.export()).messages[0]).toMatchObject({ status: 'interrupted', message: { content: 'half' } });
    expect((await fork.messages())[0]).toMatchObject({ status: 'interrupted', content: 'half' });
    expect(await stream.done()).toMatchObject({ status: 'complete', content: 'half' });
    expect((await fork.messages())[0]).toMatchObject({ status: 'interrupted' });
    await session.restore(checkpoint.id);
    expect((await session.messages())[0]).toMatchObject({ status: 'interrupted', content: 'half' });
    await tabula.close();
  });

  it('a StoredMessage can be passed back to append() and to a WorkingContext: its storage fields are dropped', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const [stored] = await session.append({ role: 'user', content: 'again', name: 'ann' });
    const [copy] = await session.append(stored!);
    expect(copy).toMatchObject({ role: 'user', content: 'again', name: 'ann', status: 'complete' });
    expect(copy!.id).not.toBe(stored!.id);
    const context = new WorkingContext({ messages: await session.messages() });
    expect(context.messages).toEqual([
      { role: 'user', content: 'again', name: 'ann' },
      { role: 'user', content: 'again', name: 'ann' },
    ]);
    // A stray storage field on its own is still an unknown field.
    await expect(session.append({ role: 'user', content: 'x', id: 'mine' } as never)).rejects.toMatchObject({ code: 'schema/invalid' });
    await tabula.close();
  });
});
