/**
 * The change feed (changes.ts) at its wire: what a tab announces on the
 * BroadcastChannel `tabula:<name>:changes`, and what it makes of what other
 * tabs send there — a change from sync arrives as 'remote' with its save
 * conflict (its end to end test, with a sync server, is
 * test/unit/sync/other-tabs.test.ts: Node only), a malformed message is reported and dropped, a listener that
 * throws does not keep the others from hearing. A raw BroadcastChannel in
 * the test plays the other tab.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isTabulaError, type SessionChange } from '../../../src/index.js';
import { freshTabula, waitFor } from './helpers.js';

const opened: BroadcastChannel[] = [];

/** The other tab: a channel of its own on the feed's name. */
function otherTab(dbName: string): { channel: BroadcastChannel; received: unknown[] } {
  const channel = new BroadcastChannel(`tabula:${dbName}:changes`);
  opened.push(channel);
  const received: unknown[] = [];
  channel.onmessage = (event: MessageEvent<unknown>) => received.push(event.data);
  return { channel, received };
}

afterEach(() => {
  for (const channel of opened.splice(0)) channel.close();
  vi.unstubAllGlobals();
});

/** Records every BroadcastChannel opened while it is installed, and whether it was closed. */
function recordChannels(): { name: string; closed: boolean }[] {
  const channels: { name: string; closed: boolean }[] = [];
  const Real = globalThis.BroadcastChannel;
  vi.stubGlobal(
    'BroadcastChannel',
    class extends Real {
      readonly #record: { name: string; closed: boolean };
      constructor(name: string) {
        super(name);
        this.#record = { name, closed: false };
        channels.push(this.#record);
      }
      override close(): void {
        this.#record.closed = true;
        super.close();
      }
    },
  );
  return channels;
}

const state = (summary: string) => ({ summary, tasks: null, plan: null, permissions: null, tools: [], context: {} });

describe('what a tab announces to the others', () => {
  it('each committed local write, as a versioned message naming the session and the kinds of op', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const tab = otherTab(tabula.dbName);
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'hi' });
    await waitFor(() => tab.received.length === 2);
    expect(tab.received).toStrictEqual([
      { v: 1, userId: 'alice', sessionId: 's', kinds: ['session.create'], fromRemote: false },
      { v: 1, userId: 'alice', sessionId: 's', kinds: ['message.append'], fromRemote: false },
    ]);
    await tabula.close();
  });
});

describe('what a tab makes of the others’ messages', () => {
  it('a change another tab pulled from sync is heard as remote, with its save conflict; a plain one as tab, without', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const session = await tabula.session('s');
    const heard: SessionChange[] = [];
    session.subscribe((change) => heard.push(change));
    const tab = otherTab(tabula.dbName);
    const conflict = { version: 3, local: state('mine'), remote: state('theirs') };
    tab.channel.postMessage({ v: 1, userId: 'alice', sessionId: 's', kinds: ['state.save'], fromRemote: true, conflict });
    tab.channel.postMessage({ v: 1, userId: 'alice', sessionId: 's', kinds: ['message.append'], fromRemote: false });
    await waitFor(() => heard.length === 2);
    expect(heard).toStrictEqual([
      { userId: 'alice', sessionId: 's', kinds: ['state.save'], origin: 'remote', conflict },
      { userId: 'alice', sessionId: 's', kinds: ['message.append'], origin: 'tab' },
    ]);
    await tabula.close();
  });

  it('a delete another tab pulled from sync reaches this tab with the work it dropped; a malformed list of it is refused', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const heard: SessionChange[] = [];
    tabula.subscribe((change) => heard.push(change));
    const tab = otherTab(tabula.dbName);
    const dropped = { messages: ['m1'], memory: [{ scope: 'default', key: 'k' }], notes: ['n1'], state: true };
    tab.channel.postMessage({ v: 1, userId: 'alice', sessionId: 's', kinds: ['session.delete'], fromRemote: true, dropped: { ...dropped, notes: 'n1' } });
    tab.channel.postMessage({ v: 1, userId: 'alice', sessionId: 's', kinds: ['session.delete'], fromRemote: true, dropped });
    await waitFor(() => heard.length === 1);
    expect(heard).toStrictEqual([{ userId: 'alice', sessionId: 's', kinds: ['session.delete'], origin: 'remote', dropped }]);
    expect(tabula.reported.map((error) => (error as Error & { code?: string }).code)).toEqual(['schema/invalid']);
    await tabula.close();
  });

  it('a malformed message is reported as schema/invalid and reaches no listener; the next good one does', async () => {
    const tabula = await freshTabula();
    const heard: SessionChange[] = [];
    tabula.subscribe((change) => heard.push(change));
    const tab = otherTab(tabula.dbName);
    tab.channel.postMessage({ v: 2, userId: 'anonymous', sessionId: 's', kinds: ['message.append'], fromRemote: false });
    tab.channel.postMessage({ v: 1, userId: 'anonymous', sessionId: 'later', kinds: ['message.append'], fromRemote: false });
    // Messages from one channel arrive in the order they were sent: once the second is heard, the first was handled.
    await waitFor(() => heard.length === 1);
    expect(heard.map((change) => change.sessionId)).toEqual(['later']);
    expect(tabula.reported).toHaveLength(1);
    const [error] = tabula.reported;
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    expect(error!.message).toMatch(/^Ignored a malformed change message from another tab: v: /);
    expect((error as Error & { issues?: unknown[] }).issues).toHaveLength(1);
    await tabula.close();
  });
});

describe('listeners', () => {
  it('one that throws is reported; the others of the session and of every session still hear the change', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const failure = new Error('listener bug');
    const heard: string[] = [];
    session.subscribe(() => {
      throw failure;
    });
    session.subscribe(() => heard.push('session'));
    tabula.subscribe(() => heard.push('all'));
    await session.append({ role: 'user', content: 'hi' });
    expect(heard).toEqual(['session', 'all']);
    expect(tabula.reported).toHaveLength(1);
    expect(tabula.reported[0]).toMatchObject({ code: 'argument/invalid', message: 'A subscribe() listener threw; the others were still called.', cause: failure });
    await tabula.close();
  });

  it('hear only their own session; stopping one leaves the others of the same session subscribed', async () => {
    const tabula = await freshTabula();
    const [s, t] = [await tabula.session('s'), await tabula.session('t')];
    const heard: string[] = [];
    const stopFirst = s.subscribe((change) => heard.push(`first:${change.sessionId}`));
    s.subscribe((change) => heard.push(`second:${change.sessionId}`));
    await t.append({ role: 'user', content: 'elsewhere' });
    expect(heard).toEqual([]);
    stopFirst();
    stopFirst();
    await s.append({ role: 'user', content: 'here' });
    expect(heard).toEqual(['second:s']);
    await tabula.close();
  });
});

describe('channels', () => {
  it('a write that commits while close() runs still reaches the other tabs, and every channel ends closed', async () => {
    const channels = recordChannels();
    const a = await freshTabula();
    const b = await freshTabula({ name: a.dbName });
    const heard: string[] = [];
    b.subscribe((change) => heard.push(change.kinds.join()));
    const memory = (await a.session('s')).memory('m');
    // The transaction has written when close() runs, and commits after it: the write lands and is announced.
    const result = await memory.transact(async (tx) => {
      await tx.set('k', 1);
      await a.close();
      return 'landed';
    });
    expect(result).toBe('landed');
    await waitFor(() => heard.includes('memory.set'));
    expect(await (await b.session('s')).memory('m').get('k')).toBe(1);
    await b.close();
    const feeds = channels.filter((channel) => channel.name === `tabula:${a.dbName}:changes`);
    // a's and b's feeds, and the channel of its own that a's late write announced itself on.
    expect(feeds).toHaveLength(3);
    expect(channels.filter((channel) => !channel.closed)).toEqual([]);
  });

  it('without BroadcastChannel (an old browser) a tab still opens, writes and hears its own changes', async () => {
    vi.stubGlobal('BroadcastChannel', undefined);
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const heard: string[] = [];
    session.subscribe((change) => heard.push(change.kinds.join()));
    await session.append({ role: 'user', content: 'hi' });
    expect(await session.run(async () => 'ran')).toBe('ran');
    expect(await session.interrupt()).toBe(false);
    expect(heard).toEqual(['message.append']);
    await tabula.close();
    expect(tabula.reported).toEqual([]);
  });
});
