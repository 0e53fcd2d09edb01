import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { TabulaError, createBlackboard, isTabulaError, type BlackboardChange } from '../../../src/index.js';
import { TabSyncProvider } from '../../../src/blackboard/tab-provider.js';
import { MemoryHub } from './memory-hub.js';

describe('Blackboard over a Y.Doc', () => {
  it('gets, sets, deletes, lists and copies JSON values', () => {
    const board = createBlackboard({ doc: new Y.Doc() });
    board.set('plan', { steps: ['a'] });
    board.set('count', 2);
    expect(board.get('plan')).toEqual({ steps: ['a'] });
    expect(board.has('count')).toBe(true);
    expect(board.keys()).toEqual(['count', 'plan']);
    const copy = board.get('plan') as { steps: string[] };
    copy.steps.push('mutated');
    expect(board.get('plan')).toEqual({ steps: ['a'] });
    board.delete('count');
    expect(board.has('count')).toBe(false);
    expect(board.get('count')).toBeUndefined();
    expect(board.toJSON()).toEqual({ plan: { steps: ['a'] } });
  });

  it('stores a copy: changing the value after set() changes nothing', () => {
    const board = createBlackboard({ doc: new Y.Doc() });
    const value = { n: [1] };
    board.set('k', value);
    value.n.push(2);
    expect(board.get('k')).toEqual({ n: [1] });
  });

  it('refuses a value that is not JSON, naming the key, and changes nothing', () => {
    const board = createBlackboard({ doc: new Y.Doc() });
    board.set('keep', 1);
    try {
      board.set('when', { at: new Date() } as never);
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toMatch(/blackboard key "when".*at\.at|blackboard key "when" is not a JSON value: at at/);
    }
    expect(() => board.update({ a: 1, b: NaN })).toThrow(/blackboard key "b"/);
    expect(() => board.set('', 1)).toThrow(/non-empty string/);
    expect(board.toJSON()).toEqual({ keep: 1 });
  });

  it('refuses a value nested 20,000 deep with schema/invalid, not a RangeError, and changes nothing (issue 10 item 12)', () => {
    const doc = new Y.Doc();
    const board = createBlackboard({ doc });
    board.set('keep', 1);
    let deepArray: unknown = 1;
    let deepObject: unknown = 1;
    for (let i = 0; i < 20_000; i++) {
      deepArray = [deepArray];
      deepObject = { a: deepObject };
    }
    let updates = 0;
    doc.on('update', () => updates++);
    expect(() => board.set('deep', deepArray as never)).toThrow(expect.objectContaining({ code: 'schema/invalid' }) as Error);
    expect(() => board.update({ ok: 1, deep: deepObject as never })).toThrow(expect.objectContaining({ code: 'schema/invalid' }) as Error);
    expect(updates).toBe(0);
    expect(board.toJSON()).toEqual({ keep: 1 });
  });

  it('a throwing observe() listener does not make set() throw; it is reported and the other listeners still run (issue 10 item 12)', () => {
    const reported: unknown[] = [];
    const board = createBlackboard({ doc: new Y.Doc(), onListenerError: (error) => reported.push(error) });
    const seen: string[] = [];
    board.observe(() => {
      throw new Error('listener bug');
    });
    board.observe((changes) => seen.push(...changes.map((c) => c.key)));
    expect(() => board.set('k', 1)).not.toThrow();
    expect(board.get('k')).toBe(1);
    expect(seen).toEqual(['k']);
    expect(reported).toEqual([expect.objectContaining({ message: 'listener bug' })]);
  });

  it('observe() on a closed board throws storage/closed and registers nothing; closing removes the observers (issue 10 item 13)', () => {
    const doc = new Y.Doc();
    const lease = new AbortController();
    let open = true;
    const board = createBlackboard({
      doc,
      signal: lease.signal,
      assertOpen: () => {
        if (!open) throw new TabulaError('storage/closed', 'closed');
      },
    });
    const other = createBlackboard({ doc });
    const seen: string[] = [];
    board.observe((changes) => seen.push(...changes.map((c) => c.key)));
    other.set('before', 1);
    open = false;
    lease.abort();
    expect(() => board.observe(() => seen.push('late'))).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
    other.set('after', 2);
    expect(seen).toEqual(['before']);
  });

  it('update() and transact() are one transaction for observers', () => {
    const board = createBlackboard({ doc: new Y.Doc() });
    const batches: BlackboardChange[][] = [];
    const stop = board.observe((changes) => batches.push(changes));
    board.update({ a: 1, b: 2 });
    board.transact(() => {
      board.set('c', 3);
      board.delete('a');
    });
    stop();
    board.set('d', 4);
    expect(batches).toEqual([
      [
        { key: 'a', value: 1, origin: 'local' },
        { key: 'b', value: 2, origin: 'local' },
      ],
      [
        { key: 'a', value: undefined, origin: 'local' },
        { key: 'c', value: 3, origin: 'local' },
      ],
    ]);
  });
});

describe('two docs joined by the tab provider', () => {
  function pair() {
    const hub = new MemoryHub();
    const errors: Error[] = [];
    const docs = [new Y.Doc(), new Y.Doc()];
    const providers = docs.map((doc, i) => new TabSyncProvider(doc, { peerId: `tab${i}`, transport: hub.connect(), onError: (e) => errors.push(e), resyncIntervalMs: 0 }));
    const boards = docs.map((doc, i) => createBlackboard({ doc, sourceOf: (origin) => (origin === providers[i] ? 'tab' : 'local') }));
    return { hub, errors, docs, providers, boards: boards as [ReturnType<typeof createBlackboard>, ReturnType<typeof createBlackboard>] };
  }

  it('a write in one reaches the other, reported with origin tab', () => {
    const { hub, boards } = pair();
    const seen: BlackboardChange[] = [];
    boards[1].observe((changes) => seen.push(...changes));
    boards[0].set('goal', 'ship it');
    hub.drain();
    expect(boards[1].get('goal')).toBe('ship it');
    expect(seen).toEqual([{ key: 'goal', value: 'ship it', origin: 'tab' }]);
  });

  it('a listener that throws in the receiving tab does not make the update count as undecodable (issue 10 item 12)', () => {
    const hub = new MemoryHub();
    const errors: Error[] = [];
    const docs = [new Y.Doc(), new Y.Doc()];
    for (const [i, doc] of docs.entries()) new TabSyncProvider(doc, { peerId: `tab${i}`, transport: hub.connect(), onError: (e) => errors.push(e), resyncIntervalMs: 0 });
    const listenerErrors: unknown[] = [];
    const sender = createBlackboard({ doc: docs[0]! });
    const receiver = createBlackboard({ doc: docs[1]!, onListenerError: (e) => listenerErrors.push(e) });
    receiver.observe(() => {
      throw new Error('listener bug');
    });
    // An app observer on the doc itself, outside the blackboard API.
    docs[1]!.getMap('blackboard').observe(() => {
      throw new Error('doc observer bug');
    });
    sender.set('k', 'v');
    hub.drain();
    expect(receiver.get('k')).toBe('v');
    expect(listenerErrors).toHaveLength(1);
    expect(errors.map((e) => e.message)).not.toContainEqual(expect.stringMatching(/could not be decoded/));
    expect(errors).toEqual([expect.objectContaining({ code: 'argument/invalid', message: expect.stringMatching(/observer of the blackboard doc threw/) as string })]);
    expect(errors[0]?.cause).toEqual(new Error('doc observer bug'));
  });

  it('a late joiner catches up through the step-1/step-2 exchange', () => {
    const hub = new MemoryHub();
    const early = new Y.Doc();
    const earlyBoard = createBlackboard({ doc: early });
    earlyBoard.update({ a: 1, b: [2] });
    new TabSyncProvider(early, { peerId: 'early', transport: hub.connect(), onError: () => undefined, resyncIntervalMs: 0 });
    const late = new Y.Doc();
    const lateBoard = createBlackboard({ doc: late });
    lateBoard.set('c', 'from late');
    const provider = new TabSyncProvider(late, { peerId: 'late', transport: hub.connect(), onError: () => undefined, resyncIntervalMs: 0 });
    provider.resync();
    hub.drain();
    expect(lateBoard.toJSON()).toEqual({ a: 1, b: [2], c: 'from late' });
    expect(earlyBoard.toJSON()).toEqual(lateBoard.toJSON());
  });

  it('a tab that missed an update catches up at the next resync', () => {
    const { hub, boards, providers } = pair();
    boards[0].set('missed', 1);
    expect(hub.queue).toHaveLength(1);
    hub.drop(0);
    boards[0].set('seen', 2);
    hub.drain();
    // The second update depends on the first: Yjs holds it back until the gap is filled.
    expect(boards[1].toJSON()).toEqual({});
    providers[1]!.resync();
    hub.drain();
    expect(boards[1].toJSON()).toEqual({ missed: 1, seen: 2 });
  });

  it('reports and ignores malformed frames and updates that are not JSON', () => {
    const { hub, errors, boards } = pair();
    hub.inject({ v: 1, from: 'rogue', to: null, data: 'not bytes' });
    hub.inject({ v: 1, from: 'rogue', to: null, data: new Uint8Array([2, 3, 255]) });
    // A well-formed Yjs update that puts binary content under a blackboard key.
    const rogueDoc = new Y.Doc();
    let update: Uint8Array | null = null;
    rogueDoc.on('update', (u: Uint8Array) => (update = u));
    rogueDoc.getMap('blackboard').set('evil', new Uint8Array([1, 2]));
    const message = new Uint8Array([2, ...varUint(update!.byteLength), ...update!]);
    hub.inject({ v: 1, from: 'rogue', to: null, data: message });
    // Each of the two tabs reports each bad message once.
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/Ignored a blackboard message from another tab: data: .*expected Uint8Array/),
      expect.stringMatching(/Ignored a blackboard message from another tab: data: .*expected Uint8Array/),
      expect.stringMatching(/it could not be decoded/),
      expect.stringMatching(/it could not be decoded/),
      expect.stringMatching(/key "evil" would hold ContentBinary, not a JSON value/),
      expect.stringMatching(/key "evil" would hold ContentBinary, not a JSON value/),
    ]);
    expect(boards[0].has('evil')).toBe(false);
    expect(boards[1].has('evil')).toBe(false);
  });
});

function varUint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
