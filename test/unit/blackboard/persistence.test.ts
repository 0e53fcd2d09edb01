/**
 * A blackboard doc's IndexedDB log: compaction starts just above its bound
 * and leaves one row holding the whole state, and flushed() resolves only
 * once every earlier update is committed.
 */
import * as Y from 'yjs';
import { afterEach, describe, expect, it } from 'vitest';
import { deleteDocDatabase, persistDoc, type DocPersistence, type PersistenceOptions } from '../../../src/blackboard/persistence.js';
import type { TabulaError } from '../../../src/core/index.js';
import { uniqueName } from '../store/helpers.js';

const open: DocPersistence[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((p) => p.close()));
});

function persist(name: string, options: Partial<PersistenceOptions> = {}) {
  const errors: TabulaError[] = [];
  const doc = new Y.Doc();
  const persistence = persistDoc(name, doc, { onError: (error) => errors.push(error), ...options });
  open.push(persistence);
  return { doc, persistence, errors };
}

/**
 * A log of exactly `rows` rows: y-indexeddb stores one row per update, and
 * one more on every open (so a reopened log counts rows + 1 when it loads).
 */
async function logOf(rows: number): Promise<{ name: string; expected: Record<string, unknown> }> {
  const name = uniqueName('bb-log');
  const { doc, persistence } = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
  await persistence.whenLoaded;
  const map = doc.getMap('m');
  const start = (await persistence.size()).rows;
  for (let i = start; i < rows; i++) map.set(`k${i}`, i);
  await persistence.flushed();
  expect((await persistence.size()).rows).toBe(rows);
  const expected = map.toJSON();
  await persistence.close();
  open.splice(open.indexOf(persistence), 1);
  return { name, expected };
}

describe('blackboard persistence: compaction bounds', () => {
  it('compacts on load only above compactAboveRows', async () => {
    const { name, expected } = await logOf(5);
    const atBound = persist(name, { compactAboveRows: 6 }); // 5 rows + the open's own
    await atBound.persistence.whenLoaded;
    expect((await atBound.persistence.size()).rows).toBe(6);
    await atBound.persistence.close();
    open.pop();

    const above = persist(name, { compactAboveRows: 6 }); // now 7 rows
    await above.persistence.whenLoaded;
    expect((await above.persistence.size()).rows).toBe(1);
    expect(above.doc.getMap('m').toJSON()).toEqual(expected);
    expect(above.errors).toEqual([]);
  });

  it('compacts above 20 rows by default', async () => {
    for (const [rows, after] of [[19, 20], [20, 1]] as const) {
      const { name, expected } = await logOf(rows);
      const reopened = persist(name);
      await reopened.persistence.whenLoaded;
      expect((await reopened.persistence.size()).rows, `${rows} rows`).toBe(after);
      expect(reopened.doc.getMap('m').toJSON()).toEqual(expected);
    }
  });

  it('compact() merges the whole log into one row that rebuilds the same doc', async () => {
    const { name, expected } = await logOf(7);
    const { persistence } = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await persistence.whenLoaded;
    const bytesBefore = (await persistence.size()).bytes;
    expect(await persistence.compact()).toEqual({ rowsBefore: 8, rowsAfter: 1 });
    const size = await persistence.size();
    expect(size.rows).toBe(1);
    expect(size.bytes).toBeGreaterThan(0);
    expect(size.bytes).toBeLessThan(bytesBefore);
    expect(await persistence.compact()).toEqual({ rowsBefore: 1, rowsAfter: 1 });

    const rebuilt = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await rebuilt.persistence.whenLoaded;
    expect(rebuilt.doc.getMap('m').toJSON()).toEqual(expected);
  });

  it('compact() keeps rows another connection wrote after this doc loaded', async () => {
    const name = uniqueName('bb-two');
    const first = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await first.persistence.whenLoaded;
    first.doc.getMap('m').set('mine', 1);
    await first.persistence.flushed();
    // Another tab's doc on the same database, with no channel to this one: its rows reach only the log.
    const second = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await second.persistence.whenLoaded;
    second.doc.getMap('m').set('theirs', 2);
    await second.persistence.flushed();
    expect((await first.persistence.compact()).rowsAfter).toBe(1);
    const rebuilt = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await rebuilt.persistence.whenLoaded;
    expect(rebuilt.doc.getMap('m').toJSON()).toEqual({ mine: 1, theirs: 2 });
  });

  it('compact() of an empty log changes nothing', async () => {
    const name = uniqueName('bb-empty');
    const { persistence } = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await persistence.whenLoaded;
    const { rows } = await persistence.size();
    expect(await persistence.compact()).toEqual({ rowsBefore: rows, rowsAfter: rows });
    expect((await persistence.size()).rows).toBe(rows);
  });
});

describe('blackboard persistence: a compaction that fails', () => {
  it('is reported, and the board is loaded without it', async () => {
    const { name, expected } = await logOf(4);
    // Once y-indexeddb has loaded the log, every readwrite transaction on this database aborts (a full
    // disk, a blocked store): compaction's does.
    let armed = false;
    const proto = IDBDatabase.prototype;
    // Wrapped and restored below; it is always called with its database as `this`.
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const original = proto.transaction;
    proto.transaction = function (this: IDBDatabase, ...args: Parameters<typeof original>) {
      const tx = original.apply(this, args);
      if (armed && this.name === name && tx.mode === 'readwrite') queueMicrotask(() => tx.abort());
      return tx;
    } as typeof original;
    try {
      const reopened = persist(name, { compactAboveRows: 2 });
      void reopened.persistence.provider.whenSynced.then(() => (armed = true));
      await reopened.persistence.whenLoaded;
      expect(reopened.doc.getMap('m').toJSON()).toEqual(expected);
      expect(reopened.errors).toHaveLength(1);
      expect(reopened.errors[0]).toMatchObject({ code: 'storage/failed', message: `Could not compact the blackboard database "${name}".` });
      // fake-indexeddb reports the abort as a failed request first; a browser may report either.
      expect((reopened.errors[0]?.cause as Error).message).toMatch(/^IndexedDB transaction (aborted|failed)$/);
      await expect(reopened.persistence.flushed()).rejects.toThrow(/^IndexedDB transaction (aborted|failed)$/);
    } finally {
      proto.transaction = original;
    }
  });
});

describe('blackboard persistence: flushed()', () => {
  it('resolves only after every update written before it has committed', async () => {
    const name = uniqueName('bb-flush');
    const { doc, persistence } = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await persistence.whenLoaded;
    // Watch every readwrite transaction on this database: y-indexeddb's own writes and the barrier.
    const pending = new Set<IDBTransaction>();
    const proto = IDBDatabase.prototype;
    // Wrapped and restored below; it is always called with its database as `this`.
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const original = proto.transaction;
    proto.transaction = function (this: IDBDatabase, ...args: Parameters<typeof original>) {
      const tx = original.apply(this, args);
      if (this.name === name && tx.mode === 'readwrite') {
        pending.add(tx);
        tx.addEventListener('complete', () => pending.delete(tx));
      }
      return tx;
    } as typeof original;
    try {
      for (let i = 0; i < 30; i++) doc.getMap('m').set(`k${i}`, 'x'.repeat(2000));
      expect(pending.size).toBeGreaterThan(0);
      await persistence.flushed();
      expect(pending.size).toBe(0);
    } finally {
      proto.transaction = original;
    }
    const rebuilt = persist(name, { compactAboveRows: Number.MAX_SAFE_INTEGER });
    await rebuilt.persistence.whenLoaded;
    expect(Object.keys(rebuilt.doc.getMap('m').toJSON())).toHaveLength(30);
  });

  it('deleteDocDatabase() removes the stored doc', async () => {
    const { name } = await logOf(3);
    await deleteDocDatabase(name);
    const reopened = persist(name);
    await reopened.persistence.whenLoaded;
    expect(reopened.doc.getMap('m').toJSON()).toEqual({});
  });
});
