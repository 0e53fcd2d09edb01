/**
 * The cross-tab provider (src/blackboard/tab-provider.ts) frame by frame:
 * who answers what, which frames a tab ignores, the periodic and on-focus
 * resync, and what close() stops. Frames travel through a MemoryHub, so the
 * test sees each one; timers are Vitest's fake ones (no waiting).
 */
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import * as syncProtocol from 'y-protocols/sync';
import * as Y from 'yjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createBlackboard } from '../../../src/index.js';
import { TabSyncProvider, broadcastTransport, type TabFrame } from '../../../src/blackboard/tab-provider.js';
import type { TabulaError } from '../../../src/core/index.js';
import { MemoryHub } from './memory-hub.js';
import { uniqueName, waitFor } from '../store/helpers.js';

/** The sync message type of a frame's data (step 1, step 2 or update). */
function typeOf(frame: TabFrame): number {
  return decoding.readVarUint(decoding.createDecoder(frame.data));
}

/** A step 1 (state vector) frame from `from`, for the doc `doc`. */
function step1(from: string, to: string | null, doc = new Y.Doc()): TabFrame {
  const encoder = encoding.createEncoder();
  syncProtocol.writeSyncStep1(encoder, doc);
  return { v: 1, from, to, data: encoding.toUint8Array(encoder) };
}

/** An update frame that sets `key` in the blackboard map. */
function updateFrame(from: string, to: string | null, key: string, value: unknown): TabFrame {
  const doc = new Y.Doc();
  doc.getMap('blackboard').set(key, value);
  const encoder = encoding.createEncoder();
  syncProtocol.writeUpdate(encoder, Y.encodeStateAsUpdate(doc));
  return { v: 1, from, to, data: encoding.toUint8Array(encoder) };
}

/** One provider on a hub, with a listening second endpoint that records what it sends. */
function tab(options: { resyncIntervalMs?: number } = {}) {
  const hub = new MemoryHub();
  const errors: TabulaError[] = [];
  const doc = new Y.Doc();
  const board = createBlackboard({ doc });
  const provider = new TabSyncProvider(doc, { peerId: 'me', transport: hub.connect(), onError: (e) => errors.push(e), ...options });
  const peer = hub.connect();
  peer.onFrame(() => undefined);
  const sent = () => hub.queue.splice(0).map((p) => p.frame);
  return { hub, errors, doc, board, provider, sent };
}

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe('TabSyncProvider', () => {
  it('answers a broadcast step 1 with step 2 and its own step 1, both addressed to the asker; a directed one with step 2 only', () => {
    const { hub, board, sent } = tab({ resyncIntervalMs: 0 });
    board.set('k', 1);
    sent();
    hub.inject(step1('other', null));
    const replies = sent();
    expect(replies.map((f) => [f.from, f.to, typeOf(f)])).toEqual([
      ['me', 'other', syncProtocol.messageYjsSyncStep2],
      ['me', 'other', syncProtocol.messageYjsSyncStep1],
    ]);
    // The step 2 carries what the asker (an empty doc) lacks.
    const asker = new Y.Doc();
    const decoder = decoding.createDecoder(replies[0]!.data);
    decoding.readVarUint(decoder);
    Y.applyUpdate(asker, decoding.readVarUint8Array(decoder));
    expect(asker.getMap('blackboard').toJSON()).toEqual({ k: 1 });

    hub.inject(step1('other', 'me'));
    expect(sent().map((f) => [f.to, typeOf(f)])).toEqual([['other', syncProtocol.messageYjsSyncStep2]]);
  });

  it('applies updates and step 2 sent to it or to all, and ignores its own and those addressed to another tab', () => {
    const { hub, board, errors, sent } = tab({ resyncIntervalMs: 0 });
    hub.inject(updateFrame('me', null, 'own', 1));
    hub.inject(updateFrame('other', 'someone-else', 'theirs', 1));
    hub.inject(step1('other', 'someone-else'));
    expect(board.toJSON()).toEqual({});
    expect(sent()).toEqual([]);
    hub.inject(updateFrame('other', null, 'broadcast', 1));
    hub.inject(updateFrame('other', 'me', 'direct', 2));
    expect(board.toJSON()).toEqual({ broadcast: 1, direct: 2 });
    // What came from another tab is not echoed back: every tab got the original.
    expect(sent()).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('broadcasts each local change as one update', () => {
    const { board, sent } = tab({ resyncIntervalMs: 0 });
    board.set('a', 1);
    board.update({ b: 2, c: 3 });
    const frames = sent();
    expect(frames.map((f) => [f.from, f.to, typeOf(f)])).toEqual([
      ['me', null, syncProtocol.messageYjsUpdate],
      ['me', null, syncProtocol.messageYjsUpdate],
    ]);
  });

  it('refuses frames of the wrong shape and unknown message types, naming the problem', () => {
    const { hub, board, errors, sent } = tab({ resyncIntervalMs: 0 });
    const good = updateFrame('other', null, 'k', 1);
    const bad: unknown[] = [
      null,
      { ...good, v: 2 },
      { ...good, from: '' },
      { ...good, to: '' },
      { ...good, extra: true },
      { ...good, data: [...good.data] },
      { v: 1, from: 'other', to: null, data: new Uint8Array([7, 0]) },
    ];
    for (const frame of bad) hub.inject(frame);
    expect(board.toJSON()).toEqual({});
    expect(sent()).toEqual([]);
    expect(errors.map((e) => e.code)).toEqual(bad.map(() => 'schema/invalid'));
    expect(errors.every((e) => e.message.startsWith('Ignored a blackboard message from another tab: '))).toBe(true);
    expect(errors.at(-1)?.message).toBe('Ignored a blackboard message from another tab: unknown sync message type 7.');
    expect(errors.at(-1)?.cause).toBeUndefined();
    // A frame that does not decode carries the decoder's error, for the console.
    hub.inject({ v: 1, from: 'other', to: null, data: new Uint8Array([0]) });
    expect(errors.at(-1)?.message).toBe('Ignored a blackboard message from another tab: it could not be decoded.');
    expect(errors.at(-1)?.cause).toBeInstanceOf(Error);
    errors.pop();
    hub.inject(good);
    expect(board.toJSON()).toEqual({ k: 1 });
  });

  it('refuses an update that overwrites a key of this tab\'s board with a shared type, found through its origin in the doc', () => {
    const { hub, doc, board, errors } = tab({ resyncIntervalMs: 0 });
    board.set('k', 1);
    const other = new Y.Doc();
    Y.applyUpdate(other, Y.encodeStateAsUpdate(doc));
    let overwrite: Uint8Array | undefined;
    other.on('update', (update: Uint8Array) => {
      overwrite = update;
    });
    other.getMap('blackboard').set('k', new Y.Text('slipped'));
    const encoder = encoding.createEncoder();
    syncProtocol.writeUpdate(encoder, overwrite!);
    hub.inject({ v: 1, from: 'other', to: null, data: encoding.toUint8Array(encoder) });
    expect(board.toJSON()).toEqual({ k: 1 });
    expect(errors.map((e) => e.message)).toEqual(['Ignored a blackboard message from another tab: key "k" would hold ContentType, not a JSON value.']);
  });

  it('re-exchanges state vectors every resyncIntervalMs, 10 s by default, and not at all with 0', () => {
    vi.useFakeTimers();
    const byDefault = tab();
    vi.advanceTimersByTime(9_999);
    expect(byDefault.sent()).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(byDefault.sent().map((f) => [f.to, typeOf(f)])).toEqual([[null, syncProtocol.messageYjsSyncStep1]]);
    vi.advanceTimersByTime(10_000);
    expect(byDefault.sent()).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(1);
    byDefault.provider.close();
    // Closing clears the interval (no timer left behind), not just silences it.
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(30_000);
    expect(byDefault.sent()).toEqual([]);

    const custom = tab({ resyncIntervalMs: 50 });
    vi.advanceTimersByTime(100);
    expect(custom.sent()).toHaveLength(2);
    custom.provider.close();

    const off = tab({ resyncIntervalMs: 0 });
    vi.advanceTimersByTime(60_000);
    expect(off.sent()).toEqual([]);
  });

  it('resyncs when the page becomes visible again, and stops listening once closed', () => {
    // The page's document (Chromium), or a stand-in with the same events (Node); its visibility is set by hand.
    const page: EventTarget = typeof document === 'object' ? document : new EventTarget();
    if (typeof document !== 'object') vi.stubGlobal('document', page);
    let visibility = 'hidden';
    Object.defineProperty(page, 'visibilityState', { configurable: true, get: () => visibility });
    const added = vi.spyOn(page, 'addEventListener');
    const removed = vi.spyOn(page, 'removeEventListener');
    try {
      const { provider, sent, doc } = tab({ resyncIntervalMs: 0 });
      const listeners = added.mock.calls.filter(([type]) => type === 'visibilitychange').map(([, listener]) => listener);
      expect(listeners).toHaveLength(1);
      const updateListeners = () => (doc as unknown as { _observers: Map<string, Set<unknown>> })._observers.get('update')?.size ?? 0;
      const before = updateListeners();
      page.dispatchEvent(new Event('visibilitychange'));
      expect(sent()).toEqual([]);
      visibility = 'visible';
      page.dispatchEvent(new Event('visibilitychange'));
      expect(sent().map((f) => typeOf(f))).toEqual([syncProtocol.messageYjsSyncStep1]);
      provider.close();
      page.dispatchEvent(new Event('visibilitychange'));
      expect(sent()).toEqual([]);
      // Nothing of the provider stays attached to the page or the doc.
      expect(removed.mock.calls.filter(([type, listener]) => type === 'visibilitychange' && listener === listeners[0])).toHaveLength(1);
      expect(updateListeners()).toBe(before - 1);
    } finally {
      delete (page as { visibilityState?: string }).visibilityState;
    }
  });

  it('once closed sends nothing, applies nothing, and closes its transport; closing twice is harmless', () => {
    const hub = new MemoryHub();
    const doc = new Y.Doc();
    const board = createBlackboard({ doc });
    const transport = hub.connect();
    const close = vi.spyOn(transport, 'close');
    const provider = new TabSyncProvider(doc, { peerId: 'me', transport, onError: () => undefined, resyncIntervalMs: 0 });
    const peer = hub.connect();
    const received: unknown[] = [];
    peer.onFrame((frame) => received.push(frame));
    provider.close();
    provider.close();
    expect(close).toHaveBeenCalledTimes(1);
    board.set('after', 1);
    provider.resync();
    hub.drain();
    expect(received).toEqual([]);
    expect(board.toJSON()).toEqual({ after: 1 });
  });

  it('a frame the transport still delivers after close() is ignored', () => {
    const doc = new Y.Doc();
    let receive: (frame: unknown) => void = () => undefined;
    const posted: TabFrame[] = [];
    const provider = new TabSyncProvider(doc, {
      peerId: 'me',
      transport: { post: (frame) => posted.push(frame), onFrame: (r) => (receive = r), close: () => undefined },
      onError: () => undefined,
      resyncIntervalMs: 0,
    });
    receive(updateFrame('other', null, 'before', 1));
    provider.close();
    receive(updateFrame('other', null, 'late', 1));
    receive(step1('other', null));
    expect(doc.getMap('blackboard').toJSON()).toEqual({ before: 1 });
    expect(posted).toEqual([]);
  });
});

describe('broadcastTransport', () => {
  it('carries frames between two channels of one name, and nothing after close()', async () => {
    const name = uniqueName('bc');
    const a = broadcastTransport(name);
    const b = broadcastTransport(name);
    const got: unknown[] = [];
    b.onFrame((frame) => got.push(frame));
    a.onFrame(() => undefined);
    const frame: TabFrame = { v: 1, from: 'a', to: null, data: new Uint8Array([1, 2]) };
    a.post(frame);
    await waitFor(() => got.length === 1);
    expect(got).toEqual([frame]);
    b.close();
    a.close();
    expect(() => a.post(frame)).toThrow();
  });
});
