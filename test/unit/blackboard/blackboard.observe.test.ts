/**
 * What observe() hands a listener and what a bare board defaults to
 * (src/blackboard/blackboard.ts): frozen changes holding copies, where each
 * change is said to come from, a throwing listener's default report, and the
 * defaults of a board built over a bare Y.Doc.
 */
import * as Y from 'yjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createBlackboard, type BlackboardChange } from '../../../src/index.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('Blackboard observe()', () => {
  it('hands frozen changes holding copies: a listener cannot change the board through them', () => {
    const board = createBlackboard({ doc: new Y.Doc() });
    const seen: BlackboardChange[] = [];
    board.observe((changes) => seen.push(...changes));
    board.set('k', { list: [1] });
    const [change] = seen;
    expect(Object.isFrozen(change)).toBe(true);
    (change?.value as { list: number[] }).list.push(2);
    expect(board.get('k')).toEqual({ list: [1] });
  });

  it('reports its own writes as local whatever sourceOf says, and other origins as sourceOf says', () => {
    const doc = new Y.Doc();
    const board = createBlackboard({ doc, sourceOf: (origin) => (origin === 'sync' ? 'remote' : 'tab') });
    const seen: string[] = [];
    board.observe((changes) => seen.push(...changes.map((c) => `${c.key}:${c.origin}`)));
    board.set('own', 1);
    board.update({ own2: 2 });
    board.transact(() => board.delete('own'));
    doc.transact(() => doc.getMap('blackboard').set('synced', 3), 'sync');
    doc.transact(() => doc.getMap('blackboard').set('other', 4), 'elsewhere');
    expect(seen).toEqual(['own:local', 'own2:local', 'own:local', 'synced:remote', 'other:tab']);
    // Without sourceOf every origin is local.
    const bare = createBlackboard({ doc: new Y.Doc() });
    const origins: string[] = [];
    bare.observe((changes) => origins.push(...changes.map((c) => c.origin)));
    bare.doc.transact(() => bare.doc.getMap('blackboard').set('x', 1), 'elsewhere');
    expect(origins).toEqual(['local']);
  });

  it('sends what a listener throws to console.error by default, and the write still succeeds', () => {
    const logged = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const board = createBlackboard({ doc: new Y.Doc() });
    const failure = new Error('listener bug');
    board.observe(() => {
      throw failure;
    });
    board.set('k', 1);
    expect(board.get('k')).toBe(1);
    expect(logged).toHaveBeenCalledWith('[tabula] a blackboard observe() listener threw', failure);
  });

  it('stops a listener on its unsubscribe or when the view closes, and only that view’s', () => {
    const doc = new Y.Doc();
    const lease = new AbortController();
    const view = createBlackboard({ doc, signal: lease.signal });
    const other = createBlackboard({ doc });
    const seen: string[] = [];
    const stop = view.observe((changes) => seen.push(...changes.map((c) => `a:${c.key}`)));
    view.observe((changes) => seen.push(...changes.map((c) => `b:${c.key}`)));
    other.observe((changes) => seen.push(...changes.map((c) => `other:${c.key}`)));
    other.set('one', 1);
    stop();
    other.set('two', 2);
    lease.abort();
    other.set('three', 3);
    expect(seen).toEqual(['a:one', 'b:one', 'other:one', 'b:two', 'other:two', 'other:three']);
  });

  it('unsubscribing again, or after its view closed, is harmless (a React cleanup after close does that)', () => {
    // Yjs logs "[yjs] Tried to remove event handler that doesn't exist." for a handler removed twice.
    const logged = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const lease = new AbortController();
    const view = createBlackboard({ doc: new Y.Doc(), signal: lease.signal });
    const stopAfterClose = view.observe(() => undefined);
    const stopTwice = createBlackboard({ doc: new Y.Doc() }).observe(() => undefined);
    lease.abort();
    stopAfterClose();
    stopTwice();
    stopTwice();
    expect(logged).not.toHaveBeenCalled();
  });
});

describe('Blackboard views that close', () => {
  it('a view built on a lease already closed hears nothing', () => {
    const doc = new Y.Doc();
    const lease = new AbortController();
    lease.abort();
    const view = createBlackboard({ doc, signal: lease.signal });
    const seen: string[] = [];
    view.observe((changes) => seen.push(...changes.map((c) => c.key)));
    createBlackboard({ doc }).set('k', 1);
    expect(seen).toEqual([]);
  });

  it('leaves nothing attached: closing removes its handlers from the doc, unsubscribing removes its abort listener', () => {
    const doc = new Y.Doc();
    const map = doc.getMap('blackboard') as unknown as { _eH: { l: unknown[] } };
    const lease = new AbortController();
    const view = createBlackboard({ doc, signal: lease.signal });
    const before = map._eH.l.length;
    const removed = vi.spyOn(lease.signal, 'removeEventListener');
    const stop = view.observe(() => undefined);
    view.observe(() => undefined);
    expect(map._eH.l.length).toBe(before + 2);
    stop();
    expect(removed).toHaveBeenCalledWith('abort', stop);
    expect(map._eH.l.length).toBe(before + 1);
    lease.abort();
    expect(map._eH.l.length).toBe(before);
  });
});

describe('Blackboard over a bare Y.Doc', () => {
  it('is loaded and durable at once, exposes its doc, and keeps its data in the blackboard map', async () => {
    const doc = new Y.Doc();
    const board = createBlackboard({ doc });
    await expect(board.whenLoaded).resolves.toBeUndefined();
    await expect(board.flushed()).resolves.toBeUndefined();
    expect(board.doc).toBe(doc);
    board.set('k', [1]);
    expect(doc.getMap('blackboard').toJSON()).toEqual({ k: [1] });
    expect(board.get('missing')).toBeUndefined();
    // toJSON() lists keys sorted, as keys() does, whatever order they were written in.
    board.update({ z: 1, a: 2 });
    expect(Object.keys(board.toJSON())).toEqual(['a', 'k', 'z']);
    board.delete('z');
    board.delete('a');
    const copy = board.toJSON();
    (copy.k as number[]).push(2);
    expect(board.get('k')).toEqual([1]);
  });

  it('checks that it is open before every write and observe(), not before reads', () => {
    let open = true;
    const calls: string[] = [];
    const board = createBlackboard({
      doc: new Y.Doc(),
      assertOpen: () => {
        calls.push('check');
        if (!open) throw new Error('closed');
      },
    });
    board.set('k', 1);
    board.update({ j: 2 });
    board.delete('j');
    board.transact(() => undefined);
    board.observe(() => undefined);
    expect(calls).toHaveLength(5);
    open = false;
    for (const write of [() => board.set('k', 2), () => board.update({ k: 2 }), () => board.delete('k'), () => board.transact(() => board.set('k', 2)), () => board.observe(() => undefined)]) {
      expect(write).toThrow('closed');
    }
    expect(board.get('k')).toBe(1);
    expect(board.has('k')).toBe(true);
    expect(board.keys()).toEqual(['k']);
    expect(board.toJSON()).toEqual({ k: 1 });
  });
});
