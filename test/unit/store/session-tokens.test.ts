/**
 * session.tokens() (session-tokens.ts) with counters of every shape the
 * TokenCounter contract allows (count() only, countEach, measureEach with
 * estimates), and with the session changing while a count is under way: the
 * total returned is always the counter's over prefix + messages, and what it
 * caches for the next call never outlives a change it did not see.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApproxTokenCounter, PrefixContext, type Message, type TokenCounter, type TokenMeasure } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, nextChange, uniqueName, waitFor } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

const approx = new ApproxTokenCounter();
const user = (content: string): Message => ({ role: 'user', content });
/** The counter's own answer for the session: prefix and messages, counted together. */
const expected = async (prefix: PrefixContext, messages: readonly Message[]) => approx.count([...prefix.asMessages(), ...messages]);

/**
 * A counter with the approximate counter's numbers, in the shape asked for, recording the messages of
 * every call. `hold()` makes the next prefix count (a call of count() with the prefix's messages) wait
 * until the returned release is called: the session can be changed while tokens() is mid-way.
 */
function recordingCounter(shape: 'count' | 'countEach' | 'measureEach', estimated: (message: Message) => boolean = () => false) {
  const calls: { method: string; contents: unknown[] }[] = [];
  let gate: Promise<void> | null = null;
  const record = (method: string, messages: readonly Message[]) => calls.push({ method, contents: messages.map((m) => m.content) });
  const counter: TokenCounter & { calls: typeof calls; hold(): () => void } = {
    name: `recording-${shape}`,
    calls,
    async count(messages) {
      record('count', messages);
      if (gate && messages.every((m) => m.role === 'system')) {
        const waiting = gate;
        gate = null;
        await waiting;
      }
      return approx.count(messages);
    },
    hold() {
      let release: () => void = () => undefined;
      gate = new Promise<void>((resolve) => (release = resolve));
      return release;
    },
  };
  if (shape === 'countEach') {
    counter.countEach = async (messages) => {
      record('countEach', messages);
      return approx.countEach(messages);
    };
  }
  if (shape === 'measureEach') {
    counter.measureEach = async (messages): Promise<TokenMeasure[]> => {
      record('measureEach', messages);
      const counts = await approx.countEach(messages);
      return counts.map((tokens, i) => ({ tokens, exact: !estimated(messages[i]!) }));
    };
  }
  return counter;
}

const prefix = new PrefixContext({ systemPrompt: 'p' });

describe('session.tokens() with each shape of counter', () => {
  it('count() only: each message counted by itself once, the total the counter’s, nothing counted again', async () => {
    const counter = recordingCounter('count');
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    await session.setPrefix(prefix);
    const messages = [user('a'), user('bb'), user('ccc')];
    await session.append(messages);
    expect(await session.tokens()).toBe(await expected(prefix, messages));
    // One call per message (one message each), and one for the prefix.
    expect(counter.calls.filter((call) => call.method === 'count').map((call) => call.contents)).toEqual([['a'], ['bb'], ['ccc'], ['p']]);
    counter.calls.length = 0;
    expect(await session.tokens()).toBe(await expected(prefix, messages));
    // Everything is cached: only the prefix is counted, and no empty batch is sent to the counter.
    expect(counter.calls).toEqual([{ method: 'count', contents: ['p'] }]);
    await tabula.close();
  });

  it('countEach: one call for the new messages, none when nothing is new', async () => {
    const counter = recordingCounter('countEach');
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    await session.setPrefix(prefix);
    await session.append([user('a'), user('bb')]);
    expect(await session.tokens()).toBe(await expected(prefix, [user('a'), user('bb')]));
    await session.append(user('ccc'));
    counter.calls.length = 0;
    expect(await session.tokens()).toBe(await expected(prefix, [user('a'), user('bb'), user('ccc')]));
    expect(counter.calls).toEqual([
      { method: 'countEach', contents: ['ccc'] },
      { method: 'count', contents: ['p'] },
    ]);
    counter.calls.length = 0;
    await session.tokens();
    expect(counter.calls).toEqual([{ method: 'count', contents: ['p'] }]);
    await tabula.close();
  });

  it('measureEach with an estimate: the total includes it, but nothing is cached until every count is exact', async () => {
    let estimating = true;
    const counter = recordingCounter('measureEach', (message) => estimating && message.content === 'bb');
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    await session.setPrefix(prefix);
    const messages = [user('a'), user('bb'), user('ccc')];
    await session.append(messages);
    const total = await expected(prefix, messages);
    expect(await session.tokens()).toBe(total);
    counter.calls.length = 0;
    // Counted again, all three: not one count of a batch with an estimate was kept.
    expect(await session.tokens()).toBe(total);
    expect(counter.calls[0]).toEqual({ method: 'measureEach', contents: ['a', 'bb', 'ccc'] });
    estimating = false;
    counter.calls.length = 0;
    expect(await session.tokens()).toBe(total);
    expect(counter.calls[0]).toEqual({ method: 'measureEach', contents: ['a', 'bb', 'ccc'] });
    counter.calls.length = 0;
    expect(await session.tokens()).toBe(total);
    expect(counter.calls).toEqual([{ method: 'count', contents: ['p'] }]);
    await tabula.close();
  });
});

describe('what session.tokens() keeps for the next call', () => {
  it('a running total on the session row: of no message on an empty session, then up to the last message counted', async () => {
    const name = uniqueName();
    const counter = recordingCounter('countEach');
    const tabula = await freshTabula({ name, tokenCounter: counter });
    const session = await tabula.session('s');
    const stored = async () => {
      const raw = createDb(name);
      const row = await raw.sessions.get(['anonymous', 's']);
      raw.close();
      return row?.tokenTotals[counter.name];
    };
    expect(await session.tokens()).toBe(0);
    // The next call waits for this one's caching write, so the row read after it holds the total.
    await session.tokens();
    expect(await stored()).toEqual({ total: 0, upTo: '', messages: 0 });
    const messages = [user('a'), user('bb'), user('ccc')];
    const appended = await session.append(messages);
    const total = await approx.count(messages);
    expect(await session.tokens()).toBe(total);
    await session.tokens();
    expect(await stored()).toEqual({ total, upTo: appended.at(-1)!.order, messages: 3 });
    const [more] = await session.append(user('dddd'));
    await session.tokens();
    await session.tokens();
    expect(await stored()).toEqual({ total: total + (await approx.count([user('dddd')])), upTo: more!.order, messages: 4 });
    await tabula.close();
  });

  it('a count per message: when a removed message drops the running total, the rest are not counted again', async () => {
    const counter = recordingCounter('countEach');
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    await session.setPrefix(prefix);
    const [first] = await session.append([user('a'), user('bb'), user('ccc')]);
    await session.tokens();
    await session.memory().transact(async (tx) => tx.removeMessages([first!.id]));
    counter.calls.length = 0;
    expect(await session.tokens()).toBe(await expected(prefix, [user('bb'), user('ccc')]));
    expect(counter.calls).toEqual([{ method: 'count', contents: ['p'] }]);
    await tabula.close();
  });

  it('a message that grew while it was counted (a stream) keeps no count of its old text', async () => {
    const counter = recordingCounter('countEach');
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    await session.setPrefix(prefix);
    const stream = await session.stream({ role: 'assistant', flushIntervalMs: 0 });
    const flushedOnce = nextChange(session, 'message.update');
    stream.write('short');
    await flushedOnce;
    const release = counter.hold();
    const counting = session.tokens();
    await waitFor(() => counter.calls.some((call) => call.method === 'count'));
    const longer = 'short' + ' and a much longer text'.repeat(20);
    const flushedTwice = nextChange(session, 'message.update');
    stream.write(longer.slice('short'.length));
    await flushedTwice;
    release();
    expect(await counting).toBe(await expected(prefix, [{ role: 'assistant', content: 'short' }]));
    // Counted again from the stored text: the count of 'short' was not kept on the grown message.
    await session.tokens();
    expect(await session.tokens()).toBe(await expected(prefix, [{ role: 'assistant', content: longer }]));
    await stream.done();
    await tabula.close();
  });
});

describe('session.tokens() while the session changes', () => {
  it('a clear from another tab during the count: the count returned is of what it read, and no stale total is kept', async () => {
    const name = uniqueName();
    const counter = recordingCounter('countEach');
    const tabA = await freshTabula({ name, tokenCounter: counter });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    await a.setPrefix(prefix);
    const messages = [user('one'), user('two')];
    await a.append(messages);
    const release = counter.hold();
    const counting = a.tokens();
    await waitFor(() => counter.calls.some((call) => call.method === 'count'));
    await (await tabB.session('s')).clearContext();
    release();
    expect(await counting).toBe(await expected(prefix, messages));
    // The next count starts from the cleared session, not from a total cached over the old messages.
    await a.setPrefix(prefix);
    expect(await a.tokens()).toBe(await expected(prefix, []));
    expect(await a.messages()).toEqual([]);
    expect(tabA.reported).toEqual([]);
    await tabA.close();
    await tabB.close();
  });

  it('the session deleted from another tab during the count: the count resolves, nothing is written back, nothing reported', async () => {
    const name = uniqueName();
    const counter = recordingCounter('countEach');
    const tabA = await freshTabula({ name, tokenCounter: counter });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    await a.setPrefix(prefix);
    await a.append(user('one'));
    const release = counter.hold();
    const counting = a.tokens();
    await waitFor(() => counter.calls.some((call) => call.method === 'count'));
    await tabB.deleteSession('s');
    release();
    expect(await counting).toBe(await expected(prefix, [user('one')]));
    await tabA.close();
    expect(tabA.reported).toEqual([]);
    const raw = createDb(name);
    expect(await raw.sessions.toArray()).toEqual([]);
    expect(await raw.messages.toArray()).toEqual([]);
    raw.close();
    await tabB.close();
  });
});

describe('session.tokens() when storage fails', () => {
  it('a corrupt message row is refused by name', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    await session.append(user('fine'));
    const [stored] = await session.messages();
    const raw = createDb(name);
    await raw.messages.update(['anonymous', 's', stored!.id], { message: { role: 'robot', content: 'x' } as never });
    raw.close();
    await expect(session.tokens()).rejects.toMatchObject({ code: 'schema/invalid', message: expect.stringContaining(stored!.id) as string });
    await tabula.close();
  });

  it('a failed read of the messages says it was counting tokens of the session', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append(user('x'));
    const broken = () => {
      throw new DOMException('The read failed.', 'UnknownError');
    };
    vi.spyOn(IDBIndex.prototype, 'getAll').mockImplementation(broken);
    vi.spyOn(IDBIndex.prototype, 'openCursor').mockImplementation(broken);
    await expect(session.tokens()).rejects.toMatchObject({ code: 'storage/failed', message: expect.stringContaining('Could not count tokens of session "s" of user "anonymous"') as string });
    vi.restoreAllMocks();
    await tabula.close();
  });

  it('a failed write of the cache is reported and the count still returned; the next call counts again', async () => {
    const counter = recordingCounter('countEach');
    const tabula = await freshTabula({ tokenCounter: counter });
    const session = await tabula.session('s');
    await session.setPrefix(prefix);
    await session.append(user('x'));
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(() => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    });
    expect(await session.tokens()).toBe(await expected(prefix, [user('x')]));
    await waitFor(() => tabula.reported.length > 0);
    expect(tabula.reported[0]).toMatchObject({ code: 'storage/quota-exceeded', message: expect.stringContaining('Could not cache token counts of session "s"') as string });
    vi.restoreAllMocks();
    counter.calls.length = 0;
    expect(await session.tokens()).toBe(await expected(prefix, [user('x')]));
    expect(counter.calls[0]).toEqual({ method: 'countEach', contents: ['x'] });
    await tabula.close();
  });
});
