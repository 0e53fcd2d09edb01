/**
 * The board rule against Yjs itself, on random boards: every update Yjs
 * writes for a board (map sets and deletes, a Y.Text and other types in
 * other roots, GC on or off, two clients syncing, merges) passes; and any
 * mutation of one (bytes changed, cut, appended, inserted, numbers past
 * 2^53 spliced in) that passes is one Yjs reads to its last byte, with safe
 * clocks and no subdocument, then decodes, applies to a fresh doc and merges
 * with the original, leaving only JSON in the blackboard map. Yjs is only
 * run on what passed.
 */
import fc from 'fast-check';
import * as decoding from 'lib0/decoding';
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { BLACKBOARD_MAP, NO_BOARD_UPDATE_LIMITS, findBoardUpdateProblem } from '../../../src/core/board-update/index.js';
import { findJsonProblem } from '../../../src/core/json.js';
import { fcParams } from '../seed.js';
import { uint } from './yjs-bytes.js';

type Op =
  | { kind: 'set'; key: string; value: unknown }
  | { kind: 'delete'; key: string }
  | { kind: 'type'; at: number; text: string }
  | { kind: 'erase'; at: number; length: number }
  | { kind: 'list'; value: unknown }
  | { kind: 'nested' }
  | { kind: 'sync' };

const key = fc.constantFrom('a', 'b', 'c', 'é😀');
const json = fc.jsonValue({ maxDepth: 3 }).filter((value) => findJsonProblem(value) === null);
const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('set' as const), key, value: json }), weight: 4 },
  fc.record({ kind: fc.constant('delete' as const), key }),
  { arbitrary: fc.record({ kind: fc.constant('type' as const), at: fc.nat(40), text: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 4 }) }), weight: 2 },
  fc.record({ kind: fc.constant('erase' as const), at: fc.nat(40), length: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('list' as const), value: fc.oneof(json, fc.constant(Number.NaN), fc.constant(new Uint8Array([1, 2]))) }),
  fc.record({ kind: fc.constant('nested' as const) }),
  fc.record({ kind: fc.constant('sync' as const) }),
);
/** An op and the doc (of two) it runs on. */
const script = fc.array(fc.tuple(op, fc.nat(1)), { minLength: 1, maxLength: 25 });

/** Runs `steps` on two docs (GC on or off); returns every update they emitted and their states. */
function run(steps: readonly (readonly [Op, number])[], gc: boolean): Uint8Array[] {
  const docs = [new Y.Doc({ gc }), new Y.Doc({ gc })];
  const updates: Uint8Array[] = [];
  for (const doc of docs) doc.on('update', (update: Uint8Array) => updates.push(update));
  for (const [step, on] of steps) {
    const doc = docs[on]!;
    const text = doc.getText('notes');
    switch (step.kind) {
      case 'set':
        doc.getMap(BLACKBOARD_MAP).set(step.key, step.value);
        break;
      case 'delete':
        doc.getMap(BLACKBOARD_MAP).delete(step.key);
        break;
      case 'type':
        text.insert(Math.min(step.at, text.length), step.text);
        break;
      case 'erase':
        if (text.length > 0) text.delete(Math.min(step.at, text.length - 1), Math.min(step.length, text.length - Math.min(step.at, text.length - 1)));
        break;
      case 'list':
        doc.getArray('list').push([step.value]);
        break;
      case 'nested':
        doc.getMap('app').set('m', new Y.Map([['x', 1]]));
        break;
      case 'sync':
        Y.applyUpdate(docs[1 - on]!, Y.encodeStateAsUpdate(doc, Y.encodeStateVector(docs[1 - on]!)));
        break;
    }
  }
  return [...updates, ...docs.map((doc) => Y.encodeStateAsUpdate(doc)), Y.mergeUpdates(updates)];
}

type Mutation =
  | { kind: 'byte'; at: number; value: number }
  | { kind: 'cut'; at: number }
  | { kind: 'append'; bytes: number[] }
  | { kind: 'insert'; at: number; bytes: number[] }
  | { kind: 'remove'; at: number; count: number }
  | { kind: 'number'; at: number; value: bigint };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('byte' as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }), weight: 3 },
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('append' as const), bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 4 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 6 }) }),
  fc.record({ kind: fc.constant('remove' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 3 }) }),
  // A varuint past 2^53 in place of a byte: where a clock or a length was, the class of the 14-byte hang.
  { arbitrary: fc.record({ kind: fc.constant('number' as const), at: fc.nat(), value: fc.bigInt({ min: 2n ** 53n - 4n, max: 2n ** 56n - 1n }) }), weight: 2 },
);

function mutate(bytes: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let out = [...bytes];
  for (const m of mutations) {
    const at = out.length === 0 ? 0 : (m as { at?: number }).at! % out.length;
    switch (m.kind) {
      case 'byte':
        if (out.length > 0) out[at] = m.value;
        break;
      case 'cut':
        out = out.slice(0, at);
        break;
      case 'append':
        out.push(...m.bytes);
        break;
      case 'insert':
        out.splice(at, 0, ...m.bytes);
        break;
      case 'remove':
        out.splice(at, m.count);
        break;
      case 'number':
        out.splice(at, 1, ...uint(m.value));
        break;
    }
  }
  return new Uint8Array(out);
}

/** Yjs's own reading of `update` into a fresh doc: how many of its bytes it consumed. */
function bytesYjsReads(update: Uint8Array): number {
  const decoder = decoding.createDecoder(update);
  Y.readUpdateV2(decoder, new Y.Doc(), null, new Y.UpdateDecoderV1(decoder));
  return decoder.pos;
}

describe('the board rule against Yjs', () => {
  it('passes every update Yjs writes for a board, and what it passes of their mutations Yjs reads whole and handles, the board staying JSON', () => {
    fc.assert(
      fc.property(script, fc.boolean(), fc.array(mutation, { minLength: 1, maxLength: 3 }), (steps, gc, mutations) => {
        const updates = run(steps, gc);
        for (const update of updates) expect(findBoardUpdateProblem(update, NO_BOARD_UPDATE_LIMITS)).toBeNull();
        for (const original of updates) {
          const mutated = mutate(original, mutations);
          if (findBoardUpdateProblem(mutated, NO_BOARD_UPDATE_LIMITS) !== null) continue;
          // Checked before anything that could loop: the bytes decode to their end, clocks stay exact.
          const { structs } = Y.decodeUpdate(mutated);
          expect(bytesYjsReads(mutated)).toBe(mutated.length);
          for (const s of structs) {
            expect(s.id.clock + s.length).toBeLessThanOrEqual(Number.MAX_SAFE_INTEGER);
            expect(s.length).toBeGreaterThan(0);
            if (s instanceof Y.Item) expect(s.content).not.toBeInstanceOf(Y.ContentDoc);
          }
          const doc = new Y.Doc();
          Y.applyUpdate(doc, mutated);
          for (const [name, value] of doc.getMap(BLACKBOARD_MAP).entries()) expect(findJsonProblem(value), `key ${name}`).toBeNull();
          Y.mergeUpdates([original, mutated]);
        }
      }),
      fcParams(300),
    );
  }, 120_000);
});
