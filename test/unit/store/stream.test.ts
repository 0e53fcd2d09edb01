import { describe, expect, it } from 'vitest';
import { createDb } from '../../../src/store/schema.js';
import { freshTabula, uniqueName } from './helpers.js';

const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('session.stream', () => {
  it('persists chunks while streaming, at most every flush interval, then completes', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', name: 'bot', flushIntervalMs: 30 });
    const [row] = await session.messages();
    expect(row).toMatchObject({ id: stream.id, status: 'streaming', content: '', name: 'bot' });

    stream.write('Hel');
    stream.write('lo');
    await later(80);
    expect((await session.messages())[0]).toMatchObject({ status: 'streaming', content: 'Hello' });

    stream.write(', world');
    const final = await stream.done({ tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] });
    expect(final).toMatchObject({ id: stream.id, status: 'complete', content: 'Hello, world', name: 'bot', order: row!.order });
    expect((await session.messages())[0]).toEqual(final);
    expect(() => stream.write('late')).toThrow(expect.objectContaining({ code: 'stream/closed' }) as Error);
    await expect(stream.done()).rejects.toMatchObject({ code: 'stream/closed' });
    await tabula.close();
  });

  it('flushes at most once per interval however many chunks arrive', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    let updates = 0;
    session.subscribe((change) => {
      if (change.kinds.includes('message.update')) updates++;
    });
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 50 });
    for (let i = 0; i < 100; i++) {
      stream.write(`${i} `);
      if (i % 10 === 0) await later(5);
    }
    await stream.done();
    // ~60 ms of writing at one flush per 50 ms: a few flushes, plus the final one, never one per chunk.
    expect(updates).toBeGreaterThanOrEqual(1);
    expect(updates).toBeLessThanOrEqual(4);
    await tabula.close();
  });

  it('abort() keeps the text and marks the message interrupted', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    stream.write('partial answer');
    const stopped = await stream.abort('user stopped it');
    expect(stopped).toMatchObject({ status: 'interrupted', content: 'partial answer' });
    expect((await session.messages())[0]).toMatchObject({ status: 'interrupted', content: 'partial answer' });
    await tabula.close();
  });

  it('another tab sees the text grow', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    const seen: string[] = [];
    b.subscribe(() => {
      void b.messages().then((list) => {
        const text = list[0]?.content;
        if (typeof text === 'string' && seen.at(-1) !== text) seen.push(text);
      });
    });
    const stream = await a.stream({ role: 'assistant', flushIntervalMs: 10 });
    for (const word of ['one ', 'two ', 'three']) {
      stream.write(word);
      await later(40);
    }
    await stream.done();
    await later(50);
    expect(seen).toContain('one ');
    expect(seen).toContain('one two ');
    expect(seen.at(-1)).toBe('one two three');
    await tabA.close();
    await tabB.close();
  });

  it('a stream left by a tab that is gone is marked interrupted on the next open, its text kept', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'question' });
    const [question] = await session.messages();
    const raw = createDb(name);
    await raw.messages.put({
      id: 'dangling',
      userId: 'anonymous',
      sessionId: 's',
      order: `${question!.order.slice(0, 15)}.ffffff.gone`,
      createdAt: 1,
      status: 'streaming',
      message: { role: 'assistant', content: 'half an ans' },
      tokens: {},
    });
    raw.close();
    const reopened = await tabula.session('s');
    const messages = await reopened.messages();
    expect(messages[1]).toMatchObject({ id: 'dangling', status: 'interrupted', content: 'half an ans' });
    await tabula.close();
  });

  it('closing Tabula interrupts an unfinished stream instead of leaving it streaming', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    stream.write('cut short');
    await tabula.close();
    const again = await freshTabula({ name });
    expect((await (await again.session('s')).messages())[0]).toMatchObject({ status: 'interrupted', content: 'cut short' });
    await again.close();
  });

  it('refuses a non-assistant role and bad options', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await expect(session.stream({ role: 'user' } as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(session.stream({ role: 'assistant', flushIntervalMs: -1 })).rejects.toMatchObject({ code: 'argument/invalid' });
    const stream = await session.stream({ role: 'assistant' });
    expect(() => stream.write(42 as never)).toThrow(/string chunk/);
    await expect(stream.done({ content: 7 } as never)).rejects.toMatchObject({ code: 'schema/invalid' });
    stream.write('still open');
    expect(await stream.done()).toMatchObject({ status: 'complete', content: 'still open' });
    await tabula.close();
  });
});
