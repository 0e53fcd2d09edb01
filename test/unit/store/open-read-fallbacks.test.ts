/**
 * The fallbacks of open-read.ts, forced: a native connection that refuses a
 * new transaction because it is closing (another tab's upgrade or delete
 * arrived), a transaction to reuse that is over, and a browser without
 * IndexedDB 3's getAll options. Each read must come back the same through
 * its fallback; an error that is not one of those must not be swallowed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readMessageRows, readSessionOpen } from '../../../src/store/open-read.js';
import { createDb, type TabulaDb } from '../../../src/store/db/schema.js';
import { messageRow, type MessageRow } from '../../../src/store/db/rows.js';
import { uniqueName } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

const ids = (rows: unknown[]) => rows.map((row) => (row as MessageRow).id);

async function seeded(): Promise<TabulaDb> {
  const db = createDb(uniqueName('fallbacks'));
  await db.sessions.put({ userId: 'u', sessionId: 's', marker: 'row' } as never);
  await db.messages.bulkPut(
    [0, 1, 2, 3].map((i) =>
      messageRow({ id: `m${i}`, userId: 'u', sessionId: 's', order: `00${i}`, createdAt: i, status: i === 3 ? 'streaming' : 'complete', message: { role: 'user', content: `${i}` } }),
    ),
  );
  return db;
}

/** A transaction whose every use throws `name`, as one that is over does. */
const over = (name: string) =>
  ({
    objectStore() {
      throw new DOMException(`The transaction is over (${name}).`, name);
    },
  }) as unknown as IDBTransaction;

describe('readSessionOpen when the native connection refuses a transaction', () => {
  it('reads through Dexie when it is closing (InvalidStateError), and rethrows any other error', async () => {
    const db = await seeded();
    try {
      const native = await readSessionOpen(db, 'u', 's');
      const refuse = (name: string) =>
        vi.spyOn(IDBDatabase.prototype, 'transaction').mockImplementationOnce(() => {
          throw new DOMException('The connection is closing.', name);
        });
      refuse('InvalidStateError');
      const viaDexie = await readSessionOpen(db, 'u', 's');
      expect(viaDexie.tx).toBeNull();
      expect(viaDexie.row).toEqual(native.row);
      expect(ids([...viaDexie.unfinished.streams])).toEqual(['m3']);
      refuse('NotFoundError');
      await expect(readSessionOpen(db, 'u', 's')).rejects.toMatchObject({ name: 'NotFoundError' });
    } finally {
      db.close();
    }
  });
});

describe('readMessageRows with a transaction to reuse that is over', () => {
  it('reads in a new transaction when the old one is finished or inactive, and rethrows any other error', async () => {
    const db = await seeded();
    try {
      for (const name of ['InvalidStateError', 'TransactionInactiveError']) {
        expect(ids(await readMessageRows(db, 'u', 's', undefined, over(name)))).toEqual(['m0', 'm1', 'm2', 'm3']);
        expect(ids(await readMessageRows(db, 'u', 's', 2, over(name)))).toEqual(['m2', 'm3']);
      }
      await expect(readMessageRows(db, 'u', 's', 2, over('NotFoundError'))).rejects.toMatchObject({ name: 'NotFoundError' });
      await expect(readMessageRows(db, 'u', 's', 2, { objectStore: () => { throw new Error('not a DOMException'); } } as unknown as IDBTransaction)).rejects.toThrow('not a DOMException');
    } finally {
      db.close();
    }
  });

  it('reads through Dexie when the native connection refuses a new transaction too', async () => {
    const db = await seeded();
    try {
      vi.spyOn(IDBDatabase.prototype, 'transaction').mockImplementationOnce(() => {
        throw new DOMException('The connection is closing.', 'InvalidStateError');
      });
      expect(ids(await readMessageRows(db, 'u', 's', 3, over('InvalidStateError')))).toEqual(['m1', 'm2', 'm3']);
    } finally {
      db.close();
    }
  });
});

describe('readMessageRows without IndexedDB 3', () => {
  it('reads the last n through Dexie, in the same order, when getAll takes no options', async () => {
    const prototypes = [IDBIndex.prototype, IDBObjectStore.prototype];
    const descriptors = prototypes.map((prototype) => Object.getOwnPropertyDescriptor(prototype, 'getAllRecords'));
    const getAll = Object.getOwnPropertyDescriptor(IDBIndex.prototype, 'getAll')?.value as (this: IDBIndex, query?: IDBKeyRange, count?: number) => IDBRequest;
    // As in a browser before IndexedDB 3, from before the database opens (Dexie looks once, on an object store): no getAllRecords,
    // and getAll takes a key or a key range only (an options object is no valid key: DataError).
    for (const prototype of prototypes) delete (prototype as { getAllRecords?: unknown }).getAllRecords;
    vi.spyOn(IDBIndex.prototype, 'getAll').mockImplementation(function (this: IDBIndex, query?: unknown, count?: number) {
      if (query !== null && typeof query === 'object' && !(query instanceof IDBKeyRange) && !Array.isArray(query)) {
        throw new DOMException('The parameter is not a valid key.', 'DataError');
      }
      return getAll.call(this, query as IDBKeyRange, count) as IDBRequest<unknown[]>;
    });
    const db = await seeded();
    try {
      expect(ids(await readMessageRows(db, 'u', 's', 2))).toEqual(['m2', 'm3']);
      expect(ids(await readMessageRows(db, 'u', 's', 10))).toEqual(['m0', 'm1', 'm2', 'm3']);
      expect(ids(await readMessageRows(db, 'u', 's'))).toEqual(['m0', 'm1', 'm2', 'm3']);
    } finally {
      prototypes.forEach((prototype, i) => {
        const descriptor = descriptors[i];
        if (descriptor) Object.defineProperty(prototype, 'getAllRecords', descriptor);
      });
      db.close();
    }
  });
});
