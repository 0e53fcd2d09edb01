import { describe, expect, it } from 'vitest';
import { isTabulaError } from '../../../src/index.js';
import { mapStorageError } from '../../../src/store/errors.js';
import { freshTabula, rawPut } from './helpers.js';

describe('corrupt rows', () => {
  it('name the table, key and field; the rest stays readable', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const [first] = await session.append({ role: 'user', content: 'good' });
    const other = await tabula.session('other');
    await other.append({ role: 'user', content: 'fine' });
    // Corrupt the first message; a newer good one follows it.
    await rawPut(tabula.dbName, 'messages', {
      id: first!.id,
      userId: 'anonymous',
      sessionId: 's',
      order: first!.order,
      createdAt: 1,
      status: 'complete',
      message: { role: 'user', content: 42 },
    });
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
