import { describe, expect, it } from 'vitest';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, nextChange, uniqueName, waitFor } from './helpers.js';

describe('session.stream', () => {
  it('persists chunks while streaming, at most every flush interval, then completes', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant', name: 'bot', flushIntervalMs: 30 });
    const [row] = await session.messages();
    expect(row).toMatchObject({ id: stream.id, status: 'streaming', content: '', name: 'bot' });

    const flushed = nextChange(session, 'message.update');
    stream.write('Hel');
    stream.write('lo');
    await flushed;
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
    for (let i = 0; i < 100; i++) stream.write(`${i} `);
    await stream.done();
    // 100 chunks within one interval: no flush before done() (the timer cannot fire between synchronous
    // writes) and the final write, whatever the machine's speed; never one per chunk.
    expect(updates).toBeGreaterThanOrEqual(1);
    expect(updates).toBeLessThanOrEqual(2);
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
    // Each flush reaches B as a change event; B re-reads and records the text it finds.
    let reads = Promise.resolve();
    b.subscribe(() => {
      reads = reads.then(async () => {
        const text = (await b.messages())[0]?.content;
        if (typeof text === 'string' && seen.at(-1) !== text) seen.push(text);
      });
    });
    const stream = await a.stream({ role: 'assistant', flushIntervalMs: 0 });
    let text = '';
    for (const word of ['one ', 'two ', 'three']) {
      stream.write(word);
      text += word;
      await waitFor(() => seen.includes(text), 30_000);
    }
    await stream.done();
    await waitFor(() => seen.at(-1) === 'one two three', 30_000);
    // The text only ever grows: each version B saw extends the one before.
    seen.slice(1).forEach((text, index) => expect(text.startsWith(seen[index]!)).toBe(true));
    expect(seen).toContain('one ');
    expect(seen).toContain('one two ');
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
      streaming: 1,
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

  it('done() rejects with stream/dropped when clearContext() removed the message mid-stream (issue 10 #2)', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    stream.write('lost words');
    await session.clearContext();
    await expect(stream.done()).rejects.toMatchObject({ code: 'stream/dropped' });
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });

  it('done() rejects when restore() replaced the message mid-stream, and abort() too (issue 10 #2)', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const checkpoint = await session.checkpoint();
    const first = await session.stream({ role: 'assistant' });
    first.write('gone');
    await session.restore(checkpoint.id);
    await expect(first.done()).rejects.toMatchObject({ code: 'stream/dropped' });
    const second = await session.stream({ role: 'assistant' });
    await session.restore(checkpoint.id);
    await expect(second.abort()).rejects.toMatchObject({ code: 'stream/dropped' });
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });

  it('done() rejects with session/not-found when the session was deleted mid-stream, from another tab too (issue 10 #2)', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const stream = await (await tabA.session('s')).stream({ role: 'assistant' });
    stream.write('text');
    await tabB.deleteSession('s');
    await expect(stream.done()).rejects.toMatchObject({ code: 'session/not-found' });
    expect(await tabA.sessions()).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('done({ role }) other than assistant is refused and the stream stays open (issue 10 #14)', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    stream.write('answer');
    await expect(stream.done({ role: 'user' } as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    expect(await stream.done({ role: 'assistant' })).toMatchObject({ role: 'assistant', status: 'complete', content: 'answer' });
    expect((await session.messages())[0]).toMatchObject({ role: 'assistant' });
    await tabula.close();
  });
});
