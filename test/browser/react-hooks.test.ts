/**
 * tabula-sdk/react in Chromium with react-dom/client: hooks render current
 * data, follow changes made by another Tabula instance on the same
 * database (another tab) including a message while it streams, leave no
 * listener and no open session handle behind on unmount, and StrictMode's
 * double effects change nothing.
 */
import { StrictMode, createElement, type ReactNode } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { afterEach, describe, expect, it } from 'vitest';
import { ApproxTokenCounter, TabulaError, openTabula, type Blackboard, type Session, type Tabula } from '../../src/index.js';
import {
  TabulaProvider,
  useBlackboard,
  useMessages,
  useSession,
  useSessions,
  useSyncStatus,
  useTabula,
  useTokens,
} from '../../src/react/index.js';
import type { SyncStatus } from '../../src/sync/index.js';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = false;

const dbName = () => `react-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
const open = (name: string) => openTabula({ name, tokenCounter: new ApproxTokenCounter() });

/** Wraps a Tabula so the test can count live listeners and open session handles through the public API. */
function counted(tabula: Tabula) {
  const counts = { listeners: 0, handles: 0 };
  const track = (unsubscribe: () => void) => {
    counts.listeners += 1;
    let done = false;
    return () => {
      if (!done) counts.listeners -= 1;
      done = true;
      unsubscribe();
    };
  };
  const forward = <T extends object>(target: T, overrides: Record<string, unknown>): T =>
    new Proxy(target, {
      get(t, property) {
        if (typeof property === 'string' && property in overrides) return overrides[property];
        const value: unknown = Reflect.get(t, property);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
      },
    });
  const wrapSession = (session: Session): Session => {
    counts.handles += 1;
    const blackboard = forward<Blackboard>(session.blackboard, {
      observe: (listener: Parameters<Blackboard['observe']>[0]) => track(session.blackboard.observe(listener)),
    });
    return forward(session, {
      blackboard,
      subscribe: (listener: Parameters<Session['subscribe']>[0]) => track(session.subscribe(listener)),
      close: async () => {
        counts.handles -= 1;
        await session.close();
      },
    });
  };
  const wrapped = forward(tabula, {
    subscribe: (listener: Parameters<Tabula['subscribe']>[0]) => track(tabula.subscribe(listener)),
    session: async (...args: Parameters<Tabula['session']>) => wrapSession(await tabula.session(...args)),
  });
  return { tabula: wrapped, counts };
}

function Chat({ id }: { id: string }): ReactNode {
  const sessions = useSessions();
  const session = useSession(id);
  const messages = useMessages(session);
  const lastOne = useMessages(session, { last: 1 });
  const board = useBlackboard(session);
  const city = useBlackboard(session, 'city');
  const tokens = useTokens(session);
  const view = {
    sessions: sessions?.map((s) => s.sessionId),
    messages: messages?.map((m) => `${m.status}:${typeof m.content === 'string' ? m.content : ''}`),
    last: lastOne?.map((m) => m.content),
    board,
    city,
    counted: tokens !== undefined && tokens > 0,
  };
  return createElement('pre', null, JSON.stringify(view));
}

const roots: Root[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) root.unmount();
});

function mount(tabula: Tabula, child: ReactNode, strict = false) {
  const container = document.createElement('div');
  document.body.append(container);
  const root = createRoot(container);
  roots.push(root);
  const tree = createElement(TabulaProvider, { tabula }, child);
  root.render(strict ? createElement(StrictMode, null, tree) : tree);
  const view = () => JSON.parse(container.textContent || '{}') as Record<string, unknown>;
  const unmount = () => {
    roots.splice(roots.indexOf(root), 1);
    root.unmount();
    container.remove();
  };
  return { view, unmount };
}

/** Polls wait for an event, not a fixed time: generous, for a loaded 2-core machine. */
const WAIT = { timeout: 15_000 };

describe('tabula-sdk/react in Chromium', { timeout: 60_000 }, () => {
  for (const strict of [false, true]) {
    it(`renders, follows another tab (streaming included), and unmounts clean${strict ? ' under StrictMode' : ''}`, async () => {
      const name = dbName();
      const [a, b] = [await open(name), await open(name)];
      const seed = await a.session('chat');
      await seed.append({ role: 'user', content: 'Three days in Lisbon?' });
      seed.blackboard.set('city', 'Lisbon');
      await seed.blackboard.flushed();
      await seed.close();

      const { tabula, counts } = counted(a);
      const { view, unmount } = mount(tabula, createElement(Chat, { id: 'chat' }), strict);
      await expect.poll(view, WAIT).toMatchObject({
        sessions: ['chat'],
        messages: ['complete:Three days in Lisbon?'],
        last: ['Three days in Lisbon?'],
        board: { city: 'Lisbon' },
        city: 'Lisbon',
        counted: true,
      });
      expect(counts.handles).toBe(1);

      // Another tab answers, streaming, and edits the board.
      const other = await b.session('chat');
      const stream = await other.stream({ role: 'assistant' });
      stream.write('Alfama, ');
      await expect.poll(view, WAIT).toMatchObject({ messages: ['complete:Three days in Lisbon?', 'streaming:Alfama, '] });
      stream.write('Belém.');
      await stream.done();
      // A write before the board has loaded is concurrent with what is stored, and Yjs may let the stored value win.
      await other.blackboard.whenLoaded;
      other.blackboard.update({ city: 'Porto', days: 3 });
      await b.session('second');
      await expect.poll(view, WAIT).toMatchObject({
        sessions: ['second', 'chat'],
        messages: ['complete:Three days in Lisbon?', 'complete:Alfama, Belém.'],
        last: ['Alfama, Belém.'],
        board: { city: 'Porto', days: 3 },
        city: 'Porto',
      });

      expect(counts.listeners).toBeGreaterThan(0);
      unmount();
      // Closing a handle is async; wait for it, then nothing may be left listening or open.
      await expect.poll(() => counts.handles, WAIT).toBe(0);
      expect(counts.listeners).toBe(0);
      await Promise.all([a.close(), b.close()]);
    });
  }

  it('useBlackboard(session, key) re-renders only when its key changes', async () => {
    const tabula = await open(dbName());
    const session = await tabula.session('s');
    let renders = 0;
    function City(): ReactNode {
      renders += 1;
      return createElement('span', null, JSON.stringify(useBlackboard(session, 'city') ?? null));
    }
    const container = document.createElement('div');
    const root = createRoot(container);
    roots.push(root);
    root.render(createElement(TabulaProvider, { tabula }, createElement(City)));
    session.blackboard.set('city', 'Oslo');
    await expect.poll(() => container.textContent, WAIT).toBe('"Oslo"');
    const before = renders;
    session.blackboard.set('weather', 'cold');
    session.blackboard.set('city', 'Bergen');
    await expect.poll(() => container.textContent, WAIT).toBe('"Bergen"');
    // Exactly one more render: the unrelated key did not cause one.
    expect(renders).toBe(before + 1);
    await session.close();
    await tabula.close();
  });

  it('useBlackboard goes on showing the board when its load failed, leaving no rejection unhandled', async () => {
    const tabula = await open(dbName());
    const session = await tabula.session('s');
    // As a board whose code could not be fetched: its whenLoaded rejects, its writes and observe() work.
    const failed = Promise.reject(new TabulaError('storage/failed', 'Could not load the blackboard code (Yjs); check that the bundle serves its lazy chunk.'));
    failed.catch(() => undefined);
    const through = <T extends object>(target: T, property: string | symbol, value: unknown) =>
      new Proxy(target, {
        get(t, p) {
          if (p === property) return value;
          const own: unknown = Reflect.get(t, p);
          return typeof own === 'function' ? (own as (...args: unknown[]) => unknown).bind(t) : own;
        },
      });
    const failing = through(session, 'blackboard', through(session.blackboard, 'whenLoaded', failed));
    function City(): ReactNode {
      return createElement('span', null, JSON.stringify(useBlackboard(failing, 'city') ?? null));
    }
    const container = document.createElement('div');
    const root = createRoot(container);
    roots.push(root);
    root.render(createElement(TabulaProvider, { tabula }, createElement(City)));
    await expect(failed).rejects.toBeInstanceOf(TabulaError);
    session.blackboard.set('city', 'Oslo');
    await expect.poll(() => container.textContent, WAIT).toBe('"Oslo"');
    // Vitest fails the run on an unhandled rejection: the hook's handler for the failed load is what this guards.
    await session.close();
    await tabula.close();
  });

  it('useSyncStatus is null without sync and follows a sync handle when there is one', async () => {
    const base = await open(dbName());
    function Status(): ReactNode {
      const status = useSyncStatus();
      return createElement('span', null, status === null ? 'none' : `${status.state}/${status.pending}`);
    }
    const plain = mount(base, createElement(Status));
    await expect.poll(() => document.body.textContent, WAIT).toContain('none');
    plain.unmount();

    let status: SyncStatus = { state: 'syncing', pending: 2, lastSyncedAt: null, parked: [] };
    const listeners = new Set<() => void>();
    const sync = {
      status: () => ({ ...status }), // a new object per call, as an implementation may do
      subscribe(listener: () => void) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    const withSync = Object.assign(Object.create(base) as Tabula, { sync });
    const container = document.createElement('div');
    const root = createRoot(container);
    root.render(createElement(TabulaProvider, { tabula: withSync }, createElement(Status)));
    await expect.poll(() => container.textContent, WAIT).toBe('syncing/2');
    status = { state: 'idle', pending: 0, lastSyncedAt: Date.now(), parked: [] };
    for (const listener of listeners) listener();
    await expect.poll(() => container.textContent, WAIT).toBe('idle/0');
    root.unmount();
    expect(listeners.size).toBe(0);
    await base.close();
  });

  it('useSyncStatus follows the parked items, also when nothing else in the status changes', async () => {
    // The hook once compared only state, pending, lastSyncedAt and error: parking an item the server
    // refused, or dropParked(), changed nothing it looked at, and the component kept the old list.
    const base = await open(dbName());
    const reason = new TabulaError('sync/too-large', 'The server refused it.');
    const item = (id: string, seq: number) => ({ id, seq, kind: 'message.append' as const, sessionId: 'trip', reason });
    let status: SyncStatus = { state: 'idle', pending: 0, lastSyncedAt: 1, parked: [] };
    const listeners = new Set<() => void>();
    const sync = {
      status: () => ({ ...status, parked: [...status.parked] }), // new objects per call, as an implementation may do
      subscribe(listener: () => void) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    let renders = 0;
    function Parked(): ReactNode {
      const current = useSyncStatus();
      renders += 1;
      return createElement('span', null, current === null ? 'none' : current.parked.map((p) => p.id).join(',') || 'no parked');
    }
    const withSync = Object.assign(Object.create(base) as Tabula, { sync });
    const container = document.createElement('div');
    const root = createRoot(container);
    root.render(createElement(TabulaProvider, { tabula: withSync }, createElement(Parked)));
    await expect.poll(() => container.textContent, WAIT).toBe('no parked');
    const notify = () => {
      for (const listener of listeners) listener();
    };
    status = { ...status, parked: [item('p1', 3)] };
    notify();
    await expect.poll(() => container.textContent, WAIT).toBe('p1');
    status = { ...status, parked: [item('p1', 3), item('p2', 4)] };
    notify();
    await expect.poll(() => container.textContent, WAIT).toBe('p1,p2');
    // The same items again, in new objects: no new snapshot, so no render for nothing.
    const before = renders;
    notify();
    status = { ...status, parked: [item('p2', 3)] };
    notify();
    await expect.poll(() => container.textContent, WAIT).toBe('p2');
    expect(renders).toBe(before + 1);
    root.unmount();
    expect(listeners.size).toBe(0);
    await base.close();
  });

  it('useTabula outside a provider says what is missing', () => {
    function Orphan(): ReactNode {
      useTabula();
      return null;
    }
    const errors: unknown[] = [];
    const root = createRoot(document.createElement('div'), { onUncaughtError: (error) => errors.push(error) });
    root.render(createElement(Orphan));
    return expect.poll(() => errors, WAIT)
      .toEqual([expect.objectContaining({ code: 'argument/invalid', message: expect.stringContaining('<TabulaProvider tabula={…}>') as string })])
      .finally(() => root.unmount());
  });
});
