import { afterEach, describe, expect, it, vi } from 'vitest';
import { isTabulaError } from '../../../src/index.js';
import { mapStorageError } from '../../../src/store/errors.js';
import { applyOps } from '../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../src/store/db/schema.js';
import { corruptMessage, freshTabula, rawPut } from './helpers.js';
import { append, at, create, memorySet, prefix, replica, save, SESSION, USER } from './replicas.js';

describe('corrupt rows', () => {
  it('name the table, key and field; the rest stays readable', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const [first] = await session.append({ role: 'user', content: 'good' });
    const other = await tabula.session('other');
    await other.append({ role: 'user', content: 'fine' });
    // Corrupt the first message; a newer good one follows it.
    await corruptMessage(tabula.dbName, first!);
    await session.append({ role: 'assistant', content: 'later' });

    try {
      await session.messages();
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      const message = (error as Error).message;
      expect(message).toContain('table "messages"');
      expect(message).toContain(first!.id);
      expect(message).toContain('message.content');
    }
    expect((await session.messages({ last: 1 })).map((m) => m.content)).toEqual(['later']);
    expect((await other.messages()).map((m) => m.content)).toEqual(['fine']);
    expect(await session.state()).toMatchObject({ version: 0 });
    await tabula.close();
  });

  it('a write to a session whose row is corrupt is refused by name and changes nothing', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'kept' });
    const db = indexedDB.open(tabula.dbName);
    const row = await new Promise<Record<string, unknown>>((resolve, reject) => {
      db.onsuccess = () => {
        const request = db.result.transaction('sessions').objectStore('sessions').get(['anonymous', 's']);
        request.onsuccess = () => resolve(request.result as Record<string, unknown>);
        request.onerror = () => reject(request.error ?? new Error('get failed'));
        db.result.close();
      };
    });
    await rawPut(tabula.dbName, 'sessions', { ...row, version: 'seven' });
    await expect(session.append({ role: 'user', content: 'lost?' })).rejects.toMatchObject({
      code: 'schema/invalid',
      message: expect.stringContaining('table "sessions"') as unknown,
    });
    await expect(session.note('n')).rejects.toMatchObject({ code: 'schema/invalid' });
    // Nothing of the refused writes was stored.
    await rawPut(tabula.dbName, 'sessions', row);
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);
    expect(await session.notes()).toEqual([]);
    await tabula.close();
  });

  it('ops a sync pull applies to a session whose row is corrupt are refused by name, and nothing of them lands', async () => {
    const { name } = await replica([create(at(1)), append(at(2), 'm1')]);
    const db = createDb(name);
    const stored = await db.sessions.get([USER, SESSION]);
    // tokenTotals: null made the append path fail with a raw TypeError before the row was validated.
    await db.sessions.put({ ...stored!, tokenTotals: null as never });
    for (const ops of [[append(at(3), 'm2')], [append(at(3), 'm2'), append(at(4), 'm3')], [prefix(at(3), 'p')], [save(at(3), 1, { summary: 'x' })], [memorySet(at(3), 'k', 1)]]) {
      const refused = await db.transaction('rw', sessionTables(db), async () => applyOps(db, ops)).then(
        () => null,
        (error: unknown) => error,
      );
      expect(isTabulaError(refused, 'schema/invalid'), `${ops[0]!.kind}: ${String(refused)}`).toBe(true);
      expect((refused as Error).message).toMatch(/^Row \["u","s"\] of IndexedDB table "sessions" is corrupt/);
    }
    expect((await db.messages.toArray()).map((row) => row.id)).toEqual(['m1']);
    expect(await db.memory.count()).toBe(0);
    expect((await db.sessions.get([USER, SESSION]))?.tokenTotals).toBeNull();
    db.close();
  });

  it('a copy of a session with a corrupt message is refused by name and stores nothing: export, and checkpoint as well', async () => {
    // The bug: checkpoint() copied the message rows into its snapshot without checking them (export checks
    // every row), so a corrupt row was frozen into the checkpoint and queued for sync.
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const [first] = await session.append({ role: 'user', content: 'good' });
    await session.append({ role: 'assistant', content: 'later' });
    await corruptMessage(tabula.dbName, first!);
    for (const copy of [() => session.export(), () => session.checkpoint('before the fix')]) {
      const error: unknown = await copy().then(
        () => null,
        (reason: unknown) => reason,
      );
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      const message = (error as Error).message;
      expect(message).toContain('table "messages"');
      expect(message).toContain(first!.id);
      expect(message).toContain('message.content');
    }
    expect(await session.checkpoints()).toEqual([]);
    await tabula.close();
  });

  it('a foreign session row is refused by name, other sessions still list', async () => {
    const tabula = await freshTabula();
    await tabula.session('good');
    await rawPut(tabula.dbName, 'sessions', { userId: 'anonymous', sessionId: 'bad', updatedAt: 5, version: 'x' });
    const bad = tabula.session('bad');
    await expect(bad).rejects.toThrow(/Row \["anonymous","bad"\] of IndexedDB table "sessions".*version/);
    await expect(tabula.sessions()).rejects.toMatchObject({ code: 'schema/invalid' });
    expect(await (await tabula.session('good')).messageCount()).toBe(0);
    await tabula.close();
  });
});

describe('a disk that fails every request at once', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('fails an append whole, as storage/failed, with no rejection left unhandled (the refused adds and the row write each fail)', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    // Once the row is known, an append issues its adds and the row write together, on a native transaction.
    await session.append({ role: 'user', content: 'kept' });
    const fail = () => {
      throw new DOMException('disk on fire', 'UnknownError');
    };
    vi.spyOn(IDBObjectStore.prototype, 'add').mockImplementation(fail);
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(fail);
    await expect(session.append({ role: 'user', content: 'lost' })).rejects.toMatchObject({ code: 'storage/failed' });
    vi.restoreAllMocks();
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);
    // Vitest fails the run on an unhandled rejection; the next append also proves the session still writes.
    await session.append({ role: 'user', content: 'after' });
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept', 'after']);
    await tabula.close();
  });
});

describe('storage error mapping', () => {
  it('maps QuotaExceededError, also wrapped in an AbortError, to storage/quota-exceeded', () => {
    const quota = new DOMException('full', 'QuotaExceededError');
    expect(mapStorageError(quota, 'append').code).toBe('storage/quota-exceeded');
    const wrapped = Object.assign(new Error('Transaction aborted'), { name: 'AbortError', inner: quota });
    const mapped = mapStorageError(wrapped, 'append to session "s"');
    expect(mapped.code).toBe('storage/quota-exceeded');
    expect(mapped.message).toMatch(/^Could not append to session "s": the browser's storage quota/);
    expect(mapped.cause).toBe(wrapped);
    const bulk = Object.assign(new Error('bulk'), { name: 'BulkError', failures: [new Error('x'), quota] });
    expect(mapStorageError(bulk, 'import').code).toBe('storage/quota-exceeded');
  });

  it('maps a closed database to storage/closed and anything else to storage/failed', () => {
    expect(mapStorageError(Object.assign(new Error('closed'), { name: 'DatabaseClosedError' }), 'read').code).toBe('storage/closed');
    const other = mapStorageError(new Error('disk on fire'), 'read messages');
    expect(other.code).toBe('storage/failed');
    expect(other.message).toBe('Could not read messages: disk on fire');
  });
});
