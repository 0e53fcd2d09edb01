/**
 * The check of a Yjs update from another tab (src/blackboard/validate.ts):
 * what it lets through (JSON under blackboard keys, deletions, the
 * application's own root types) and what it refuses, with the reason.
 */
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { BLACKBOARD_MAP, checkBlackboardUpdate } from '../../../src/blackboard/validate.js';
import { content, hangUpdate, struct, update } from '../core/yjs-bytes.js';

/** The whole state of a doc built by `build`, as one update. */
function updateOf(build: (doc: Y.Doc) => void): Uint8Array {
  const doc = new Y.Doc();
  build(doc);
  return Y.encodeStateAsUpdate(doc);
}

describe('checkBlackboardUpdate', () => {
  it('lets JSON values, overwritten and deleted keys, and other root types through', () => {
    expect(BLACKBOARD_MAP).toBe('blackboard');
    expect(checkBlackboardUpdate(updateOf((doc) => doc.getMap('blackboard').set('k', { a: [1, 'x', null, true] })))).toBeNull();
    const churned = updateOf((doc) => {
      const map = doc.getMap('blackboard');
      map.set('k', 1);
      map.set('k', 2);
      map.set('gone', 'x');
      map.delete('gone');
    });
    // The overwritten and deleted items travel as deleted content.
    expect(Y.decodeUpdate(churned).structs.some((s) => s instanceof Y.Item && s.content instanceof Y.ContentDeleted)).toBe(true);
    expect(checkBlackboardUpdate(churned)).toBeNull();
    // The application's Y.Text (or any other root) is its own business: binary content there passes.
    expect(
      checkBlackboardUpdate(
        updateOf((doc) => {
          doc.getText('notes').insert(0, 'hello');
          doc.getMap('other').set('bytes', new Uint8Array([1]));
          doc.getMap('other').set('nan', NaN);
        }),
      ),
    ).toBeNull();
  });

  it('refuses bytes that are not a Yjs update', () => {
    expect(checkBlackboardUpdate(new Uint8Array([255, 255, 255]))).toMatch(/^it does not decode as a Yjs update \(.+\)$/);
  });

  it('refuses list content in the blackboard map', () => {
    expect(checkBlackboardUpdate(updateOf((doc) => doc.getArray('blackboard').push([1])))).toBe('it inserts into the blackboard map as if it were a list');
  });

  it('refuses a key holding a shared type or bytes, naming the key and the content', () => {
    expect(checkBlackboardUpdate(updateOf((doc) => doc.getMap('blackboard').set('nested', new Y.Map())))).toBe('key "nested" would hold ContentType, not a JSON value');
    expect(checkBlackboardUpdate(updateOf((doc) => doc.getMap('blackboard').set('raw', new Uint8Array([1]))))).toBe('key "raw" would hold ContentBinary, not a JSON value');
  });

  it('refuses a key holding a value that is not JSON, after the JSON values before it', () => {
    const problem = checkBlackboardUpdate(
      updateOf((doc) => {
        const map = doc.getMap('blackboard');
        map.set('fine', 1);
        map.set('bad', { n: NaN });
      }),
    );
    expect(problem).toMatch(/^key "bad" would hold a value that is not JSON \(.+\)$/);
  });
});

describe('checkBlackboardUpdate is the rule the server stores pushes by', () => {
  it('refuses what decodes but the server refuses: the 14 bytes that hang Y.mergeUpdates, trailing bytes, a subdocument', () => {
    expect(checkBlackboardUpdate(hangUpdate(1))).toMatch(/^it holds a clock of 9007199254740994, past Number\.MAX_SAFE_INTEGER/);
    const state = updateOf((doc) => doc.getMap('blackboard').set('k', 1));
    expect(checkBlackboardUpdate(new Uint8Array([...state, 0]))).toMatch(/1 byte after the delete set/);
    expect(checkBlackboardUpdate(update([{ client: 1, clock: 0, structs: [struct.item({ root: 'app', key: 'sub' }, content.doc('guid'))] }]))).toMatch(/subdocument/);
  });
});

describe('checkBlackboardUpdate with the document it is for', () => {
  it('refuses an overwrite of an existing key with a shared type, which names its key only through its origin in the doc', () => {
    const doc = new Y.Doc();
    doc.getMap('blackboard').set('k', 1);
    const other = new Y.Doc();
    Y.applyUpdate(other, Y.encodeStateAsUpdate(doc));
    const updates: Uint8Array[] = [];
    other.on('update', (update: Uint8Array) => updates.push(update));
    other.getMap('blackboard').set('k', new Y.Text('slipped'));
    other.getText('notes').insert(0, 'fine');
    const [overwrite, typed] = updates;
    // The update alone does not say where the Y.Text goes (the server's view of it).
    expect(checkBlackboardUpdate(overwrite!)).toBeNull();
    expect(checkBlackboardUpdate(overwrite!, doc)).toBe('key "k" would hold ContentType, not a JSON value');
    expect(checkBlackboardUpdate(typed!, doc)).toBeNull();
    // A doc without the origin cannot tell either.
    expect(checkBlackboardUpdate(overwrite!, new Y.Doc())).toBeNull();
  });
});
