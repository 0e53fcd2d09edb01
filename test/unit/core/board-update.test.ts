/**
 * The board rule (src/core/board-update/), rule by rule: what Yjs writes
 * passes; what decodes but must not be stored or applied is refused with
 * its reason, among it the 14 bytes that hang `Y.mergeUpdates` (shown
 * hanging in test/server/merge-hang.test.ts, Node only), a subdocument, trailing bytes,
 * and anything but JSON under a blackboard key, also through an origin.
 */
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { BLACKBOARD_MAP, DEFAULT_BOARD_UPDATE_LIMITS, NO_BOARD_UPDATE_LIMITS, findBoardUpdateProblem, type BoardUpdateCheck } from '../../../src/core/board-update/index.js';
import { MAX_JSON_DEPTH } from '../../../src/core/json.js';
import { boardSet, content, hangUpdate, str, struct, uint, update } from './yjs-bytes.js';

const check = (bytes: Uint8Array, rules: BoardUpdateCheck = NO_BOARD_UPDATE_LIMITS) => findBoardUpdateProblem(bytes, rules);
const messageOf = (bytes: Uint8Array, rules?: BoardUpdateCheck) => check(bytes, rules)?.message;

/** Every update `build` makes a doc emit, and the doc's whole state. */
function updatesOf(build: (doc: Y.Doc) => void, doc = new Y.Doc()): { events: Uint8Array[]; state: Uint8Array; doc: Y.Doc } {
  const events: Uint8Array[] = [];
  doc.on('update', (update: Uint8Array) => events.push(update));
  build(doc);
  return { events, state: Y.encodeStateAsUpdate(doc), doc };
}

/** A doc with client id `client`, holding `from`'s state. */
function docOf(client: number, from?: Y.Doc): Y.Doc {
  const doc = new Y.Doc();
  doc.clientID = client;
  if (from) Y.applyUpdate(doc, Y.encodeStateAsUpdate(from));
  return doc;
}

describe('what Yjs writes passes', () => {
  it('map sets, overwrites and deletes, other roots of every kind, GC runs, merges with skips and diffs', () => {
    const { events, state } = updatesOf((doc) => {
      const board = doc.getMap(BLACKBOARD_MAP);
      board.set('k', { a: [1, 'x', null, true, 2.5, -3], 'é😀': { deep: [[[]]] } });
      board.set('k', 2);
      board.set('gone', 'x');
      board.delete('gone');
      const text = doc.getText('notes');
      text.insert(0, 'héllo 😀 world', { bold: true });
      text.insertEmbed(3, { image: 'x.png' });
      text.delete(1, 4);
      doc.getArray('list').push([new Uint8Array([1, 2]), NaN, { u: undefined }, new Y.Map(), new Y.Text('t')]);
      doc.getMap('other').set('nested', new Y.Array());
      const xml = doc.getXmlFragment('xml');
      xml.insert(0, [new Y.XmlElement('p'), new Y.XmlText('x'), new Y.XmlHook('hook') as unknown as Y.XmlElement]);
    });
    expect(check(state)).toBeNull();
    for (const event of events) expect(check(event)).toBeNull();
    // Merging every other update leaves gaps that Yjs writes as skips.
    const sparse = Y.mergeUpdates(events.filter((_, i) => i % 2 === 0));
    expect(Y.decodeUpdate(sparse).structs.some((s) => s instanceof Y.Skip)).toBe(true);
    expect(check(sparse)).toBeNull();
    expect(check(Y.diffUpdate(state, Y.encodeStateVectorFromUpdate(events[0]!)))).toBeNull();
    // The empty update.
    expect(check(Y.encodeStateAsUpdate(new Y.Doc()))).toBeNull();
  });

  it('updates of several clients, whose origins point at each other in either order', () => {
    const first = docOf(1000);
    first.getMap(BLACKBOARD_MAP).set('k', 1);
    first.getText('notes').insert(0, 'ab');
    const second = docOf(2000, first);
    second.getMap(BLACKBOARD_MAP).set('k', { v: 2 });
    second.getText('notes').insert(1, 'c');
    const third = docOf(5, second);
    third.getMap(BLACKBOARD_MAP).set('k', [3]);
    expect(check(Y.encodeStateAsUpdate(third))).toBeNull();
  });

  it('a struct that ends exactly at Number.MAX_SAFE_INTEGER', () => {
    const last = Number.MAX_SAFE_INTEGER - 1;
    expect(check(update([{ client: 1, clock: last, structs: [struct.gc(1)] }], [[1, [[last, 1]]]]))).toBeNull();
  });
});

describe('decoding completely', () => {
  it('refuses bytes that do not decode, truncated updates and trailing bytes after the delete set', () => {
    expect(messageOf(new Uint8Array([255, 255, 255]))).toMatch(/^it does not decode as a Yjs update \(the update ends inside a client count, at byte 0\)$/);
    const { state } = updatesOf((doc) => doc.getMap(BLACKBOARD_MAP).set('k', 'value'));
    for (let cut = 0; cut < state.length; cut++) expect(check(state.subarray(0, cut))?.kind).toBe('malformed');
    // Yjs decodes these and ignores what follows; stored, it would be served back as it came.
    const trailing = new Uint8Array([...state, 0]);
    expect(() => Y.decodeUpdate(trailing)).not.toThrow();
    expect(check(trailing)).toEqual({ kind: 'malformed', message: `it is not an update Yjs writes (1 byte after the delete set, at byte ${state.length})` });
    expect(messageOf(new Uint8Array([...state, 1, 2, 3]))).toMatch(/3 bytes after the delete set/);
  });

  it('refuses unknown struct, content, type and value kinds, and strings that are not UTF-8', () => {
    const run = (structs: number[][]) => update([{ client: 1, clock: 0, structs }]);
    expect(messageOf(run([[11, 1, ...str('r'), 0]]))).toMatch(/struct info 11, which names no content/);
    expect(messageOf(run([[0x80 | 0, 1]]))).toMatch(/struct info 128, a GC run with flags/);
    expect(messageOf(run([struct.item({ root: 'r' }, content.type(7))]))).toMatch(/type 7, which names no shared type/);
    expect(messageOf(run([struct.item({ root: 'r' }, content.anyRaw(1, [115]))]))).toMatch(/value type 115/);
    expect(messageOf(run([struct.item({ root: 'r' }, { ref: 4, bytes: [2, 0xc3, 0x28] })]))).toMatch(/a string that is not UTF-8/);
    // Overlong forms and surrogates are not UTF-8 either (lib0 decodes strings with a fatal TextDecoder).
    for (const bad of [[0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf0, 0x9f, 0x98]]) {
      expect(messageOf(run([struct.item({ root: 'r' }, { ref: 4, bytes: [bad.length, ...bad] })]))).toMatch(/not UTF-8/);
    }
    expect(messageOf(run([struct.item({ root: 'r' }, content.json(['{oops']))]))).toMatch(/a JSON value that does not parse/);
    expect(messageOf(run([struct.item({ root: 'r' }, content.embed('undefined'))]))).toMatch(/a JSON value that does not parse/);
    expect(messageOf(run([struct.item({ root: 'r' }, content.binary([1, 2]))]).subarray(0, 10))).toMatch(/binary content runs past the end/);
  });
});

describe('clocks within Number.MAX_SAFE_INTEGER', () => {
  it('refuses the 14-byte update that hangs Y.mergeUpdates, and any clock, length or deleted range past the bound', () => {
    const hang = hangUpdate(1);
    expect(hang).toEqual(new Uint8Array([1, 1, 1, 130, 128, 128, 128, 128, 128, 128, 16, 0, 0, 0]));
    // The old check: it decodes.
    expect(() => Y.decodeUpdate(hang)).not.toThrow();
    expect(check(hang)).toEqual({
      kind: 'malformed',
      message: "it holds a clock of 9007199254740994, past Number.MAX_SAFE_INTEGER (at byte 3), where Yjs's clock arithmetic rounds and Y.mergeUpdates can loop forever",
    });
    const max = Number.MAX_SAFE_INTEGER;
    expect(messageOf(update([{ client: 1, clock: max, structs: [struct.gc(1)] }]))).toMatch(/a struct at clock 9007199254740991 of length 1, which ends, past Number.MAX_SAFE_INTEGER/);
    expect(messageOf(update([{ client: 1, clock: 0, structs: [struct.skip(2n ** 54n)] }]))).toMatch(/a struct length of 18014398509481984, past/);
    expect(messageOf(update([], [[1, [[max, 1]]]]))).toMatch(/a deleted range at clock 9007199254740991 of length 1, which ends, past/);
    expect(messageOf(update([{ client: 1, clock: 0, structs: [struct.item({ origin: [2, 2n ** 53n] }, content.deleted(1))] }]))).toMatch(/an origin clock of 9007199254740992, past/);
    // lib0 reads nine-byte varuints (values past 2^56 among them); Yjs never writes them.
    expect(messageOf(new Uint8Array([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0]))).toMatch(/a client count longer than 8 bytes/);
  });
});

describe('what Yjs never writes, and mishandles', () => {
  it('refuses structs of length 0, clients twice or out of order, and items whose origin or parent is not before them', () => {
    expect(messageOf(update([{ client: 1, clock: 0, structs: [struct.item({ root: 'r' }, content.string(''))] }]))).toMatch(/a struct of length 0 at clock 0/);
    expect(messageOf(update([{ client: 1, clock: 0, structs: [struct.gc(0)] }]))).toMatch(/a struct of length 0/);
    expect(messageOf(update([], [[1, [[5, 0]]]]))).toMatch(/a deleted range of length 0 at clock 5/);
    const gc = { clock: 0, structs: [struct.gc(1)] };
    expect(messageOf(update([{ client: 1, ...gc }, { client: 1, ...gc }]))).toMatch(/client 1 after client 1: clients come once each, in descending order/);
    expect(messageOf(update([{ client: 1, ...gc }, { client: 2, ...gc }]))).toMatch(/client 2 after client 1/);
    expect(messageOf(new Uint8Array([1, 0, 1, 0, 0]))).toMatch(/client 1 with no structs/);
    const run = (second: number[]) => update([{ client: 7, clock: 0, structs: [boardSet('k', [1]), second] }]);
    expect(messageOf(run(struct.item({ origin: [7, 1] }, content.any([2]))))).toMatch(/an item at clock 1 whose origin is not before it/);
    expect(messageOf(run(struct.item({ right: [7, 5] }, content.any([2]))))).toMatch(/whose right origin is not before it/);
    expect(messageOf(run(struct.item({ parent: [7, 1] }, content.any([2]))))).toMatch(/whose parent is not before it/);
    expect(messageOf(run(struct.item({ root: 'r' }, content.any([2])).map((byte, i) => (i === 1 ? 2 : byte))))).toMatch(/parent kind 2/);
    // Before it is fine: Yjs applies these.
    expect(check(run(struct.item({ origin: [7, 0] }, content.any([2]))))).toBeNull();
  });
});

describe('no subdocuments', () => {
  it('refuses ContentDoc under any root, at the first one, without reading on', () => {
    const { state } = updatesOf((doc) => doc.getMap('app').set('sub', new Y.Doc()));
    expect(Y.decodeUpdate(state).structs.some((s) => s instanceof Y.Item && s.content instanceof Y.ContentDoc)).toBe(true);
    expect(check(state)).toEqual({ kind: 'refused', message: 'it holds a subdocument (ContentDoc), which boards do not hold: each one is a Y.Doc built as the update is read' });
    // 6 bytes an item, each a Y.Doc to Yjs; the rule stops at the first (what follows is garbage it never reads).
    const docs = update([{ client: 1, clock: 0, structs: [struct.item({ root: 'r' }, content.doc('')), ...Array.from({ length: 1000 }, (_, i) => struct.item({ origin: [1, i] }, content.doc('')))] }]);
    expect(messageOf(new Uint8Array([...docs.subarray(0, 20), 0xff, 0xff, 0xff]))).toMatch(/subdocument/);
    expect(messageOf(docs)).toMatch(/subdocument/);
  });
});

describe('the blackboard map holds JSON under keys', () => {
  it('refuses list content, shared types, bytes, strings, embeds, formats and legacy JSON under a key, naming it', () => {
    const one = (body: ReturnType<typeof content.any>, key: string | null = 'k') => messageOf(update([{ client: 1, clock: 0, structs: [struct.item({ root: BLACKBOARD_MAP, ...(key === null ? {} : { key }) }, body)] }]));
    expect(one(content.any([1]), null)).toBe('it inserts into the blackboard map as if it were a list');
    expect(one(content.type(2))).toBe('key "k" would hold ContentType, not a JSON value');
    expect(one(content.binary([1]))).toBe('key "k" would hold ContentBinary, not a JSON value');
    expect(one(content.string('x'))).toBe('key "k" would hold ContentString, not a JSON value');
    expect(one(content.embed('{}'))).toBe('key "k" would hold ContentEmbed, not a JSON value');
    expect(one(content.format('bold', 'true'))).toBe('key "k" would hold ContentFormat, not a JSON value');
    expect(one(content.json(['1']))).toBe('key "k" would hold ContentJSON, not a JSON value');
    expect(one(content.deleted(3))).toBeUndefined();
  });

  it('refuses values that are not JSON by the core\'s rules: undefined, NaN, bigints, bytes, "__proto__" keys, nesting past MAX_JSON_DEPTH', () => {
    const value = (v: unknown) => messageOf(update([{ client: 1, clock: 0, structs: [boardSet('k', [1, v])] }]));
    expect(value(undefined)).toMatch(/^key "k" would hold a value that is not JSON \(undefined is not JSON\)$/);
    expect(value(Number.NaN)).toMatch(/NaN is not a JSON number/);
    expect(value({ a: [Number.POSITIVE_INFINITY] })).toMatch(/Infinity is not a JSON number/);
    expect(value(10n ** 20n)).toMatch(/bigint is not JSON/);
    expect(value(new Uint8Array([1]))).toMatch(/Uint8Array is not JSON/);
    expect(value({ ['__proto__']: { polluted: true } })).toMatch(/the key "__proto__" is refused/);
    let deep: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH; i++) deep = [deep];
    expect(value(deep)).toBeUndefined();
    expect(value([deep])).toMatch(new RegExp(`^key "k" would hold a value that is not JSON \\(nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects\\)$`));
    // Deeper still stops the read there: nothing recurses further.
    let deeper: unknown = 1;
    for (let i = 0; i < 5000; i++) deeper = [deeper];
    expect(value(deeper)).toMatch(/nested deeper than 512 levels/);
    expect(messageOf(update([{ client: 1, clock: 0, structs: [struct.item({ root: 'list' }, content.any([deeper]))] }]))).toMatch(/^it holds a value nested deeper than 512 levels of arrays and objects \(at byte \d+\)$/);
    expect(messageOf(update([{ client: 1, clock: 0, structs: [boardSet('__proto__', [1])] }]))).toMatch(/^it writes the blackboard key "__proto__": the key "__proto__" is refused/);
  });

  it('reads the root name as Yjs does, whatever the encoding of its length', () => {
    // An overlong varuint for "blackboard"'s length is still "blackboard" to Yjs.
    const item = [0x20 | 2, 1, 0x8a, 0x00, ...new TextEncoder().encode('blackboard'), ...str('k'), ...uint(1), ...str('1')];
    const bytes = update([{ client: 1, clock: 0, structs: [item] }]);
    const doc = new Y.Doc();
    Y.applyUpdate(doc, bytes);
    expect(doc.getMap(BLACKBOARD_MAP).get('k')).toBe(1);
    expect(messageOf(bytes)).toBe('key "k" would hold ContentJSON, not a JSON value');
  });

  it('follows origins inside the update: an overwrite holding a shared type is refused, in either client order', () => {
    for (const [firstClient, secondClient] of [
      [5, 9],
      [9, 5],
    ] as const) {
      const first = docOf(firstClient);
      first.getMap(BLACKBOARD_MAP).set('k', 1);
      const second = docOf(secondClient, first);
      second.getMap(BLACKBOARD_MAP).set('k', new Y.Text('slipped'));
      const state = Y.encodeStateAsUpdate(second);
      const overwrite = Y.decodeUpdate(state).structs.find((s) => s instanceof Y.Item && s.content instanceof Y.ContentType) as Y.Item;
      // The Y.Text names no parent: it takes the blackboard map and the key from its origin.
      expect([overwrite.parent, overwrite.parentSub, overwrite.origin?.client]).toEqual([null, null, firstClient]);
      expect(messageOf(state)).toBe('key "k" would hold ContentType, not a JSON value');
    }
  });

  it('follows a chain of origins through the update to the key it writes', () => {
    const doc = docOf(3);
    const board = doc.getMap(BLACKBOARD_MAP);
    for (let i = 0; i < 5; i++) board.set('k', i);
    const next = docOf(1, doc);
    next.getMap(BLACKBOARD_MAP).set('k', { bad: Number.NaN });
    expect(messageOf(Y.encodeStateAsUpdate(next))).toMatch(/^key "k" would hold a value that is not JSON \(NaN is not a JSON number\)$/);
  });

  it('an origin the update does not hold: unseen without the document, followed with it', () => {
    const doc = docOf(5);
    doc.getMap(BLACKBOARD_MAP).set('k', 1);
    doc.getText('notes').insert(0, 'x');
    const other = docOf(9, doc);
    const { events } = updatesOf(() => other.getMap(BLACKBOARD_MAP).set('k', new Y.Text('slipped')), other);
    const [overwrite] = events;
    // The server's view: the origin is not in the update.
    expect(check(overwrite!)).toBeNull();
    const keyAt: BoardUpdateCheck['blackboardKeyAt'] = (client, clock) => {
      if (client !== 5 || clock >= Y.getState(doc.store, 5)) return undefined;
      const item = Y.getItem(doc.store, Y.createID(client, clock));
      return item.parent === doc.getMap(BLACKBOARD_MAP) ? item.parentSub : null;
    };
    expect(messageOf(overwrite!, { ...NO_BOARD_UPDATE_LIMITS, blackboardKeyAt: keyAt })).toBe('key "k" would hold ContentType, not a JSON value');
    // Text typed after the doc's text goes where that text is: allowed.
    const { events: typed } = updatesOf(() => other.getText('notes').insert(1, 'yz'), other);
    expect(check(typed[0]!, { ...NO_BOARD_UPDATE_LIMITS, blackboardKeyAt: keyAt })).toBeNull();
  });

  it('other roots hold anything but subdocuments', () => {
    const bodies = [content.type(1), content.type(3, 'p'), content.binary([1]), content.string('x'), content.embed('{"a":1}'), content.format('bold', 'null'), content.json(['1', 'undefined']), content.any([Number.NaN, undefined, new Uint8Array([1]), 1n])];
    expect(check(update([{ client: 1, clock: 0, structs: bodies.map((body, i) => struct.item({ root: `root${i}`, key: 'k' }, body)) }]))).toBeNull();
  });
});

describe('limits', () => {
  it('refuses an update over maxBytes or maxStructs (structs and deleted ranges), as too-large', () => {
    const bytes = update([{ client: 1, clock: 0, structs: [struct.gc(1), struct.skip(1), struct.gc(1)] }], [[1, [[0, 1], [2, 1]]]]);
    expect(check(bytes, { maxBytes: bytes.length, maxStructs: 5 })).toBeNull();
    expect(check(bytes, { maxBytes: bytes.length - 1, maxStructs: 5 })).toEqual({ kind: 'too-large', message: `it is ${bytes.length} bytes, over the limit of ${bytes.length - 1} for one board update` });
    expect(check(bytes, { maxBytes: bytes.length, maxStructs: 4 })).toEqual({ kind: 'too-large', message: 'it holds more than 4 structs and deleted ranges, the limit for one board update' });
    expect(DEFAULT_BOARD_UPDATE_LIMITS).toEqual({ maxBytes: 512 * 1024, maxStructs: 131_072 });
  });
});
