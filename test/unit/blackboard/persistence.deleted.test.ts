/**
 * A blackboard database deleted by another connection (another tab deleted
 * the session): the owner is told, and a change made after that is reported
 * as not stored instead of throwing out of the Yjs update that made it.
 */
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { deleteDocDatabase, persistDoc } from '../../../src/blackboard/persistence.js';
import type { TabulaError } from '../../../src/core/index.js';
import { uniqueName } from '../store/helpers.js';

describe('blackboard persistence: its database deleted by another connection', () => {
  it('calls onDeleted, and a later change is applied in memory and reported as not stored', async () => {
    const name = uniqueName('bb-deleted');
    const doc = new Y.Doc();
    const errors: TabulaError[] = [];
    let deleted!: () => void;
    const wasDeleted = new Promise<void>((resolve) => (deleted = resolve));
    const persistence = persistDoc(name, doc, { onError: (error) => errors.push(error), onDeleted: () => deleted() });
    await persistence.whenLoaded;
    doc.getMap('m').set('before', 1);
    await persistence.flushed();
    // Another connection deletes the database: lib0 closes ours on the versionchange, so the delete is not blocked.
    await deleteDocDatabase(name);
    await wasDeleted;
    expect(() => doc.getMap('m').set('after', 2)).not.toThrow();
    expect(doc.getMap('m').toJSON()).toEqual({ before: 1, after: 2 });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'storage/failed', message: expect.stringContaining(`Could not store a blackboard change in "${name}"`) as unknown });
    expect(errors[0]?.cause).toBeInstanceOf(Error); // IndexedDB's own error, for the console
    await persistence.close();
    // After close() the doc's changes no longer reach the (closed) store at all: nothing more is reported.
    doc.getMap('m').set('closed', 3);
    expect(errors).toHaveLength(1);
  });

  it('without onDeleted, the same delete is not blocked and the board keeps working in memory', async () => {
    const name = uniqueName('bb-deleted-quiet');
    const doc = new Y.Doc();
    const errors: TabulaError[] = [];
    const persistence = persistDoc(name, doc, { onError: (error) => errors.push(error) });
    await persistence.whenLoaded;
    await deleteDocDatabase(name);
    doc.getMap('m').set('k', 1);
    expect(doc.getMap('m').get('k')).toBe(1);
    expect(errors.map((error) => error.code)).toEqual(['storage/failed']);
    await persistence.close();
  });
});
