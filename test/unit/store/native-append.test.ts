/**
 * An append to a session whose row this Tabula knows issues its requests on
 * a native IndexedDB transaction (src/store/native-requests.ts), through the
 * same write path as every other write (src/store/requests.ts). The class of
 * bug this guards: the fast path losing a guarantee (a stale row that lands,
 * a replayed id that fails the whole write, a write that waits on the
 * transaction it runs in), or silently falling back to Dexie for every
 * append, which costs the speed it exists for and no test of behaviour would
 * notice.
 *
 * How the path taken is seen: a Dexie addon (Dexie's public extension point,
 * applied to every Dexie instance made while it is registered) records the
 * readwrite transactions Dexie creates. An append on the native path creates
 * none; every write through Dexie creates one. That is the difference the
 * feature is about, seen from outside Tabula.
 */
import { Dexie, type DBCore } from 'dexie';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatHlc } from '../../../src/core/hlc.js';
import { applyAppends, applyOps, flushSlot, loadSlot, type AppendOp, type ApplyOptions } from '../../../src/store/apply/index.js';
import { abortTransaction, nativeRequests, nativeTransaction, succeeded, transactionDone } from '../../../src/store/native-requests.js';
import { dexieRequests, type WriteRequests } from '../../../src/store/requests.js';
import { createDb, type TabulaDb } from '../../../src/store/db/schema.js';
import { messageRow, type MetaRow } from '../../../src/store/db/rows.js';
import { freshTabula, uniqueName } from './helpers.js';

/** The store names of each readwrite transaction Dexie created while registered, for databases named `prefix…`. */
let dexieWrites: { db: string; stores: string[] }[] = [];
const recordWrites = (db: Dexie): void => {
  db.use({
    stack: 'dbcore',
    name: 'RecordWrites',
    create: (down: DBCore): DBCore => ({
      ...down,
      transaction(stores, mode, options) {
        if (mode === 'readwrite') dexieWrites.push({ db: db.name, stores: [...stores] });
        return down.transaction(stores, mode, options);
      },
    }),
  });
};

beforeEach(() => {
  dexieWrites = [];
  Dexie.addons.push(recordWrites);
});
afterEach(() => {
  Dexie.addons.splice(Dexie.addons.indexOf(recordWrites), 1);
});

const writesTo = (name: string) => dexieWrites.filter((write) => write.db === name).length;

describe('an append on a known session row', () => {
  it('creates no Dexie transaction, and resolves once another instance can read it', async () => {
    const name = uniqueName('native-append');
    const tabula = await freshTabula({ name });
    const other = await freshTabula({ name });
    try {
      const session = await tabula.session('s');
      await session.append({ role: 'user', content: 'first' });
      const before = writesTo(name);
      for (let i = 0; i < 5; i++) await session.append([{ role: 'user', content: `m${i}` }, { role: 'assistant', content: `r${i}` }]);
      expect(writesTo(name) - before).toBe(0);
      const seen = await other.session('s');
      expect((await seen.messages()).map((m) => m.content)).toEqual(['first', ...[0, 1, 2, 3, 4].flatMap((i) => [`m${i}`, `r${i}`])]);
      expect(await seen.messageCount()).toBe(11);
    } finally {
      await tabula.close();
      await other.close();
    }
  });

  it('built on a row another writer changed (no change event): the native attempt lands nothing, the write runs again through Dexie and lands once', async () => {
    const name = uniqueName('native-append');
    const tabula = await freshTabula({ name });
    const other = createDb(name);
    try {
      const session = await tabula.session('s');
      await session.append({ role: 'user', content: 'known' });
      // As if another tab had written 5 messages' worth, its announcement not yet arrived.
      await other.sessions.update(['anonymous', 's'], (row) => {
        row.messageCount += 5;
      });
      const before = writesTo(name);
      const [stored] = await session.append({ role: 'user', content: 'after' });
      expect(writesTo(name) - before).toBe(1);
      expect(await session.messageCount()).toBe(7);
      const contents = (await other.messages.toArray()).map((row) => row.message.content);
      expect(contents.sort()).toEqual(['after', 'known']);
      expect((await other.messages.toArray()).filter((row) => row.id === stored?.id)).toHaveLength(1);
      // The row the retry committed is known again: the next append is native.
      await session.append({ role: 'user', content: 'native again' });
      expect(writesTo(name) - before).toBe(1);
      expect(await session.messageCount()).toBe(8);
    } finally {
      other.close();
      await tabula.close();
    }
  });

  it('made inside memory().transact() joins its transaction instead of waiting for it; messages() there reads in it too', async () => {
    // Fixed with it: messages() called inside transact()'s fn read on a native transaction, outside Dexie's,
    // and the transact failed ("Transaction has already completed or failed").
    const tabula = await freshTabula();
    try {
      const session = await tabula.session('s');
      await session.append({ role: 'user', content: 'before' });
      const seen = await session.memory('m').transact(async (tx) => {
        await tx.set('k', 1);
        await session.append({ role: 'user', content: 'inside' });
        return (await session.messages()).map((m) => m.content);
      });
      expect(seen).toEqual(['before', 'inside']);
      expect((await session.messages()).map((m) => m.content)).toEqual(['before', 'inside']);
      expect(await session.memory('m').get('k')).toBe(1);
    } finally {
      await tabula.close();
    }
  });
});

describe('applyAppends, through Dexie and through a native transaction alike', () => {
  const order = (k: number) => formatHlc({ wallMs: Date.now() + 60_000 + k, counter: 0, clientId: 'native' });
  const appendOp = (id: string, content: string, k: number, after: string | undefined): AppendOp => ({
    id: `op-${id}-${k}`,
    kind: 'message.append',
    userId: 'anonymous',
    sessionId: 's',
    order: order(k),
    ...(after === undefined ? {} : { after }),
    body: { id, createdAt: 1, status: 'complete', message: { role: 'user', content } },
  });

  /** A database with session 's' holding message 'old'; the slot of 's' as loaded. */
  async function seeded(): Promise<{ db: TabulaDb; close: () => Promise<void> }> {
    const name = uniqueName('native-apply');
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'stored' });
    const [stored] = await session.messages();
    await tabula.close();
    const db = createDb(name);
    await db.open();
    // The stored message gets a fixed id, so that an op can replay it.
    await db.transaction('rw', db.messages, async () => {
      await db.messages.delete(['anonymous', 's', stored?.id as string]);
      await db.messages.add(messageRow({ ...(stored as NonNullable<typeof stored>), id: 'old', userId: 'anonymous', sessionId: 's', status: 'complete', message: { role: 'user', content: 'stored' } }));
    });
    return { db, close: async () => db.close() };
  }

  for (const way of ['dexie', 'native'] as const) {
    it(`${way}: a replayed id is refused, the rest lands, and the row counts only what landed`, async () => {
      const { db, close } = await seeded();
      try {
        const run = async (write: (requests: WriteRequests) => Promise<string[]>): Promise<string[]> => {
          if (way === 'dexie') return db.transaction('rw', [db.sessions, db.messages, db.meta, db.outbox], async () => write(dexieRequests(db)));
          const tx = db.backendDB().transaction(['sessions', 'messages', 'meta', 'outbox'], 'readwrite');
          const done = transactionDone(tx);
          const landed = await write(nativeRequests(tx));
          await done;
          return landed;
        };
        // Loaded before: a native transaction takes no request after an await of anything else.
        const slot = await loadSlot(db, 'anonymous', 's');
        const after = slot.row?.after;
        const landed = await run(async (requests) => {
          const ops = [appendOp('new1', 'new one', 1, after), appendOp('old', 'replayed', 2, after), appendOp('new2', 'new two', 3, after)];
          const applied = await applyAppends(requests, slot, ops);
          await flushSlot(requests, slot);
          return applied.map((op) => op.body.id);
        });
        expect(landed).toEqual(['new1', 'new2']);
        const rows = await db.messages.toArray();
        expect(rows.map((row) => [row.id, row.message.content]).sort()).toEqual([
          ['new1', 'new one'],
          ['new2', 'new two'],
          ['old', 'stored'],
        ]);
        expect((await db.sessions.get(['anonymous', 's']))?.messageCount).toBe(3);
      } finally {
        await close();
      }
    });
  }

  it('a sync pull onto a corrupt session row is refused by name and records no row as known (the check trusts known rows to be valid)', async () => {
    const { db, close } = await seeded();
    try {
      await db.sessions.update(['anonymous', 's'], (row) => {
        (row as unknown as { version: unknown }).version = 'corrupt';
      });
      const settled: NonNullable<ApplyOptions['settled']> = [];
      const row = await db.sessions.get(['anonymous', 's']);
      await expect(applyOps(db, [appendOp('pulled', 'pulled', 1, row?.after)], { settled })).rejects.toMatchObject({ code: 'schema/invalid' });
      expect(settled).toEqual([]);
    } finally {
      await close();
    }
  });

  it('native: a row IndexedDB cannot take rejects the add, and the aborted transaction lands nothing', async () => {
    const { db, close } = await seeded();
    try {
      const tx = db.backendDB().transaction(['sessions', 'messages', 'meta', 'outbox'], 'readwrite');
      const done = transactionDone(tx);
      const requests = nativeRequests(tx);
      const good = messageRow({ id: 'good', userId: 'anonymous', sessionId: 's', order: order(1), createdAt: 1, status: 'complete', message: { role: 'user', content: 'good' } });
      const keyless = { ...good, id: undefined } as unknown as typeof good;
      await expect(requests.messages.bulkAdd([good, keyless])).rejects.toMatchObject({ name: 'DataError' });
      tx.abort();
      await expect(done).rejects.toBeDefined();
      expect((await db.messages.toArray()).map((row) => row.id)).toEqual(['old']);
    } finally {
      await close();
    }
  });
});

/**
 * The request contract (src/store/requests.ts) both ways, on the meta store (plain key/value rows), and
 * the native transaction's helpers (src/store/native-requests.ts). The class of bug this guards: the two
 * implementations drifting apart (rows out of key order, a refused add at the end never resolving or
 * resolving as landed, an empty batch that hangs, a failure that is not a taken key passed off as one),
 * and a native transaction used where it must not be (a closed connection, inside a Dexie transaction).
 */
describe('the request contract, through Dexie and through a native transaction alike', () => {
  async function openDb(): Promise<TabulaDb> {
    const db = createDb(uniqueName('requests'));
    await db.open();
    await db.meta.bulkAdd([
      { key: 'a', value: 1 },
      { key: 'c', value: 3 },
    ]);
    return db;
  }

  for (const way of ['dexie', 'native'] as const) {
    /** Runs `write` in one readwrite transaction over the meta store, the requests made the `way` way. */
    const inTransaction = async <T>(db: TabulaDb, write: (requests: WriteRequests) => Promise<T>): Promise<T> => {
      if (way === 'dexie') return db.transaction('rw', db.meta, async () => write(dexieRequests(db)));
      const tx = db.backendDB().transaction(['meta'], 'readwrite');
      const done = transactionDone(tx);
      const result = await write(nativeRequests(tx));
      await done;
      return result;
    };

    it(`${way}: get and bulkGet give rows in the order asked, undefined where none is stored; an empty batch resolves`, async () => {
      const db = await openDb();
      try {
        const read = await inTransaction(db, async (requests) => ({
          one: await requests.meta.get('c'),
          none: await requests.meta.get('b'),
          many: await requests.meta.bulkGet(['c', 'b', 'a']),
          empty: await requests.meta.bulkGet([]),
          added: await requests.meta.bulkAdd([]),
          echoed: await requests.resolved('same'),
        }));
        expect(read).toEqual({ one: { key: 'c', value: 3 }, none: undefined, many: [{ key: 'c', value: 3 }, undefined, { key: 'a', value: 1 }], empty: [], added: new Set(), echoed: 'same' });
      } finally {
        db.close();
      }
    });

    it(`${way}: bulkAdd reports the positions whose key is taken, the last one included, and lands the rest; put replaces`, async () => {
      const db = await openDb();
      try {
        const refused = await inTransaction(db, async (requests) => {
          // Read as soon as each resolves: every refusal is known by then, not only the first.
          const first = [...(await requests.meta.bulkAdd([{ key: 'a', value: 'again' }, { key: 'b', value: 2 }, { key: 'c', value: 'again' }]))];
          const none = [...(await requests.meta.bulkAdd([{ key: 'd', value: 4 }]))];
          const last = [...(await requests.meta.bulkAdd([{ key: 'e', value: 5 }, { key: 'd', value: 'again' }]))];
          await requests.meta.put({ key: 'a', value: 'put' });
          return [first, none, last];
        });
        expect(refused).toEqual([[0, 2], [], [1]]);
        expect(await db.meta.toArray()).toEqual([
          { key: 'a', value: 'put' },
          { key: 'b', value: 2 },
          { key: 'c', value: 3 },
          { key: 'd', value: 4 },
          { key: 'e', value: 5 },
        ]);
      } finally {
        db.close();
      }
    });

    it(`${way}: a row that fails for another reason than a taken key rejects, and the transaction lands nothing`, async () => {
      const db = await openDb();
      try {
        const keyless = { value: 'no key' } as unknown as MetaRow;
        await expect(inTransaction(db, (requests) => requests.meta.bulkAdd([{ key: 'b', value: 2 }, { key: 'a', value: 'again' }, keyless]))).rejects.toMatchObject({
          name: 'DataError',
        });
        expect((await db.meta.toArray()).map((row) => row.key)).toEqual(['a', 'c']);
      } finally {
        db.close();
      }
    });
  }

  it('nativeRequests: each table reads its own store', async () => {
    const db = await openDb();
    try {
      await db.outbox.add({ seq: 7, userId: 'u', board: { sessionId: 's', update: 'AAA=' } });
      const tx = nativeTransaction(db, ['sessions', 'messages', 'meta', 'outbox'], 'readonly') as IDBTransaction;
      const requests = nativeRequests(tx);
      expect(await requests.outbox.get(['u', 7])).toEqual({ seq: 7, userId: 'u', board: { sessionId: 's', update: 'AAA=' } });
      expect(await requests.meta.get('a')).toEqual({ key: 'a', value: 1 });
      expect(await requests.sessions.get(['u', 's'])).toBeUndefined();
      expect(await requests.messages.get(['u', 's', 'm'])).toBeUndefined();
    } finally {
      db.close();
    }
  });

  it('nativeTransaction: none on a closed connection or inside a Dexie transaction; one over the stores asked otherwise', async () => {
    const db = await openDb();
    try {
      const tx = nativeTransaction(db, ['meta', 'outbox'], 'readonly');
      expect([...(tx?.objectStoreNames ?? [])]).toEqual(['meta', 'outbox']);
      expect(tx?.mode).toBe('readonly');
      await db.transaction('r', db.meta, () => {
        expect(nativeTransaction(db, ['meta'], 'readonly')).toBeNull();
      });
      db.close();
      expect(nativeTransaction(db, ['meta'], 'readonly')).toBeNull();
    } finally {
      db.close();
    }
  });

  it('nativeTransaction: none on a connection closing under Dexie (a versionchange Dexie has not seen yet)', async () => {
    const db = await openDb();
    try {
      // The native connection closes; Dexie still counts itself open.
      db.backendDB().close();
      expect(db.isOpen()).toBe(true);
      expect(nativeTransaction(db, ['meta'], 'readonly')).toBeNull();
    } finally {
      db.close();
    }
  });

  it('nativeTransaction: a store that does not exist throws (only a closing connection means "none")', async () => {
    const db = await openDb();
    try {
      expect(() => nativeTransaction(db, ['no-such-store'], 'readonly')).toThrow(expect.objectContaining({ name: 'NotFoundError' }) as Error);
    } finally {
      db.close();
    }
  });

  it('abortTransaction: aborts a live transaction (its done rejects with AbortError); after the commit it does nothing', async () => {
    const db = await openDb();
    try {
      const live = nativeTransaction(db, ['meta'], 'readwrite') as IDBTransaction;
      const aborted = transactionDone(live);
      void nativeRequests(live).meta.put({ key: 'z', value: 'never' }).catch(() => undefined);
      abortTransaction(live);
      await expect(aborted).rejects.toMatchObject({ name: 'AbortError', message: 'The IndexedDB transaction was aborted.' });
      abortTransaction(live);

      const committed = nativeTransaction(db, ['meta'], 'readwrite') as IDBTransaction;
      const done = transactionDone(committed);
      await nativeRequests(committed).meta.put({ key: 'y', value: 'kept' });
      await done;
      expect(() => abortTransaction(committed)).not.toThrow();
      expect((await db.meta.toArray()).map((row) => row.key)).toEqual(['a', 'c', 'y']);
    } finally {
      db.close();
    }
  });

  it('succeeded: resolves with the result; rejects with the request error', async () => {
    const db = await openDb();
    try {
      const tx = nativeTransaction(db, ['meta'], 'readwrite') as IDBTransaction;
      const done = transactionDone(tx);
      const store = tx.objectStore('meta');
      expect(await succeeded(store.get('a'))).toEqual({ key: 'a', value: 1 });
      const refused = store.add({ key: 'a', value: 'taken' });
      await expect(succeeded(refused)).rejects.toMatchObject({ name: 'ConstraintError' });
      await expect(done).rejects.toMatchObject({ name: 'ConstraintError' });
    } finally {
      db.close();
    }
  });
});
