import { describe, expect, it } from 'vitest';
import { ApproxTokenCounter, PrefixContext, WorkingContext, type Message, type TokenCounter } from '../../../src/index.js';
import { freshTabula, uniqueName } from './helpers.js';

/** An approximate counter that records how many messages it was asked to count. */
function spyCounter(): TokenCounter & { counted: number } {
  const inner = new ApproxTokenCounter();
  const spy = {
    name: 'spy',
    counted: 0,
    count(messages: readonly Message[]) {
      spy.counted += messages.length;
      return inner.count(messages);
    },
    countEach(messages: readonly Message[]) {
      spy.counted += messages.length;
      return inner.countEach(messages);
    },
  };
  return spy;
}

const user = (content: string): Message => ({ role: 'user', content });

describe('session.tokens()', () => {
  it('equals the counter over prefix + messages, and counts only new messages after an append', async () => {
    const counter = spyCounter();
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    const prefix = new PrefixContext({ systemPrompt: 'You are brief.' });
    await session.setPrefix(prefix);
    await session.append(Array.from({ length: 50 }, (_, i) => user(`message number ${i}`)));
    const expected = await new ApproxTokenCounter().count([...prefix.asMessages(), ...(await session.messages())]);
    expect(await session.tokens()).toBe(expected);

    await session.append(user('one more'));
    counter.counted = 0;
    const after = await session.tokens();
    // One new message, plus the one-message prefix (counted per call, cheap).
    expect(counter.counted).toBe(2);
    expect(after).toBe(expected + (await new ApproxTokenCounter().count([user('one more')])));
    await tabula.close();
  });

  it('reopening counts nothing already counted; clearContext resets', async () => {
    const name = uniqueName();
    const first = await freshTabula({ name, tokenCounter: spyCounter() });
    const s1 = await first.session('s');
    await s1.append(Array.from({ length: 30 }, (_, i) => user(`m${i}`)));
    const total = await s1.tokens();
    await first.close();

    const counter = spyCounter();
    const second = await freshTabula({ name, tokenCounter: counter });
    const s2 = await second.session('s');
    expect(await s2.tokens()).toBe(total);
    expect(counter.counted).toBe(0);
    await s2.clearContext();
    expect(await s2.tokens()).toBe(0);
    await s2.append(user('again'));
    expect(await s2.tokens()).toBe(await new ApproxTokenCounter().count([user('again')]));
    await second.close();
  });
});

describe('bridge to the pure core', () => {
  it('toContext() and freeze() carry prefix, messages and the journal with its watermark', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.setPrefix(new PrefixContext({ systemPrompt: 'p' }));
    await session.append([user('a'), { role: 'assistant', content: 'b' }, user('c')]);
    await session.journal.record('seen');
    await session.journal.markCommitted();
    await session.journal.record('new');
    const ctx = await session.toContext();
    expect(ctx).toBeInstanceOf(WorkingContext);
    expect(ctx.prefix.systemPrompt).toBe('p');
    expect(ctx.messages).toEqual([user('a'), { role: 'assistant', content: 'b' }, user('c')]);
    expect(ctx.journal.view()).toEqual(['seen', 'new']);
    expect(ctx.journal.diff()).toEqual(['new']);
    expect((await session.toContext({ last: 1 })).messages).toEqual([user('c')]);
    const frozen = await session.freeze();
    expect(frozen.equals(ctx.freeze())).toBe(true);
    await tabula.close();
  });
});

describe('fork, checkpoints, export and import', () => {
  it('fork() is a persisted, independent branch', async () => {
    const tabula = await freshTabula();
    const source = await tabula.session('main');
    await source.append([user('q'), { role: 'assistant', content: 'a' }]);
    await source.save({ tasks: ['x'] });
    await source.memory('m').set('k', 1);
    await source.journal.record('j');
    const branch = await source.fork('branch');
    expect(branch.sessionId).toBe('branch');
    const strip = (list: { order: string }[]) => list.map(({ order: _order, ...m }) => m);
    expect(strip(await branch.messages())).toEqual(strip(await source.messages()));
    expect(await branch.state()).toMatchObject({ tasks: ['x'] });
    expect(await branch.memory('m').get('k')).toBe(1);
    expect(await branch.journal.view()).toEqual(['j']);
    await branch.append(user('only in branch'));
    await branch.memory('m').set('k', 2);
    expect(await source.messageCount()).toBe(2);
    expect(await source.memory('m').get('k')).toBe(1);
    expect((await tabula.sessions()).find((s) => s.sessionId === 'branch')?.forkOf).toEqual({ userId: 'anonymous', sessionId: 'main' });
    await expect(source.fork('branch')).rejects.toMatchObject({ code: 'session/exists' });
    await tabula.close();
  });

  it('restore() puts messages, prefix and state back and keeps notes, memory and journal', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.setPrefix(new PrefixContext({ systemPrompt: 'v1' }));
    await session.append(user('before'));
    await session.save({ summary: 'at checkpoint' });
    const checkpoint = await session.checkpoint('safe point');
    expect(checkpoint).toMatchObject({ label: 'safe point' });
    await session.append(user('after'));
    await session.setPrefix(new PrefixContext({ systemPrompt: 'v2' }));
    await session.save({ summary: 'later' });
    await session.note('kept');
    await session.memory().set('kept', true);
    await session.restore(checkpoint.id);
    expect((await session.messages()).map((m) => m.content)).toEqual(['before']);
    expect((await session.prefix()).systemPrompt).toBe('v1');
    const state = await session.state();
    expect(state.summary).toBe('at checkpoint');
    expect(state.version).toBe(3);
    expect((await session.notes()).map((n) => n.text)).toEqual(['kept']);
    expect(await session.memory().get('kept')).toBe(true);
    expect(await session.checkpoints()).toEqual([checkpoint]);
    await expect(session.restore('nope')).rejects.toMatchObject({ code: 'checkpoint/not-found' });
    await session.append(user('after restore'));
    expect(await session.messageCount()).toBe(2);
    await tabula.close();
  });

  it('export() round-trips through importSession() in another database', async () => {
    const source = await freshTabula({ userId: 'alice' });
    const session = await source.session('trip');
    await session.setPrefix(new PrefixContext({ systemPrompt: 'plan', grounding: [user('doc')] }));
    await session.append([user('q'), { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', content: 'r', tool_call_id: 'c' }]);
    await session.save({ summary: 's', context: { k: 1 } });
    await session.journal.apply(['a', 'b']);
    await session.journal.markCommitted();
    await session.journal.record('c');
    await session.note('n1');
    await session.memory('x').set('k', [1]);
    const data = await session.export();
    expect(data).toMatchObject({ format: 'tabula.session', formatVersion: 1, userId: 'alice', sessionId: 'trip', version: 1 });

    const target = await freshTabula({ userId: 'alice' });
    const imported = await target.importSession(JSON.parse(JSON.stringify(data)) as typeof data);
    const again = await imported.export();
    const withoutOrder = (d: typeof data) => ({ ...d, updatedAt: 0, messages: d.messages.map(({ order: _order, ...m }) => m) });
    expect(withoutOrder(again)).toEqual(withoutOrder(data));
    const orders = again.messages.map((m) => m.order);
    expect([...orders].sort()).toEqual(orders);
    const strip = (list: { order: string }[]) => list.map(({ order: _order, ...m }) => m);
    expect(strip(await imported.messages())).toEqual(strip(await session.messages()));
    expect(await imported.journal.diff()).toEqual(['c']);
    await expect(target.importSession(data)).rejects.toMatchObject({ code: 'session/exists' });
    await expect(target.importSession({ ...data, sessionId: 'other', messages: [{ ...data.messages[0]!, message: { role: 'user' } }] } as never)).rejects.toThrow(
      /Not a valid Tabula session export: messages\[0\]\.message\.content/,
    );
    expect((await target.sessions()).map((s) => s.sessionId)).toEqual(['trip']);
    await source.close();
    await target.close();
  });
});
