/**
 * Memory (memory.ts) beyond the basics of journal-notes-memory.test.ts:
 * errors name the scope, key and session they are about (argument errors,
 * corrupt rows, failed storage); reads of keys never set or deleted; a
 * clear() with nothing to clear writes nothing; and the argument checks of
 * transact()'s appendMessages / removeMessages.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isTabulaError, type SessionChange } from '../../../src/index.js';
import { failStorage, freshTabula, rawPut } from './helpers.js';

/** The TabulaError `promise` rejects with (fails the test when it resolves or rejects with anything else). */
async function rejection(promise: Promise<unknown>): Promise<Error & { code: string }> {
  const outcome: unknown = await promise.then(
    () => new Error('resolved'),
    (error: unknown) => error,
  );
  if (!isTabulaError(outcome)) throw new Error(`expected a TabulaError, got ${String(outcome)}`);
  return outcome;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('memory errors name what they are about', () => {
  it('a bad scope, a bad key, a __proto__ key, an undefined value and a non-JSON value', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    expect(() => session.memory('')).toThrow(/^A memory scope must be a string of 1–128 characters/);
    const memory = session.memory('m');
    expect((await rejection(memory.set('', 1))).message).toMatch(/^A memory key must be a string of 1–128 characters of valid Unicode: /);
    const proto = await rejection(memory.set('__proto__', 1));
    expect(proto.code).toBe('schema/invalid');
    expect(proto.message).toMatch(/^memory key: /);
    expect((await rejection(memory.set('k', undefined as never))).message).toBe(
      'memory.set("k", undefined): a memory value cannot be undefined; use memory.delete("k") to remove a key.',
    );
    const notJson = (await rejection(memory.set('k', { when: new Date(0) } as never))) as Error & { code: string; issues?: { path: PropertyKey[] }[] };
    expect(notJson.code).toBe('memory/bad-value');
    expect(notJson.message).toMatch(/^memory\.set\("k", …\): the value is not JSON at when: /);
    expect(notJson.issues?.map((issue) => issue.path)).toEqual([['when']]);
    expect(await memory.keys()).toEqual([]);
    await tabula.close();
  });

  // A row valid but for one field: a bad order key, or a `deleted` that is truthy but not a boolean (which a
  // read that looked at `deleted` first would skip as deleted).
  it.each([
    ['a bad order key', { order: 7 }],
    ['a truthy `deleted` that is not a boolean', { deleted: 'yes' }],
  ])('a corrupt row (%s) is named by its full key from every read of the scope, clear() too; rows outside an entries() prefix still read', async (_, corruption) => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory('m');
    await memory.set('good', 1);
    const valid = { userId: 'anonymous', sessionId: 's', scope: 'm', key: 'bad', value: 2, deleted: false, order: '000000000000001.000000.gone' };
    // As written, the row reads: only the corruption makes it fail.
    await rawPut(tabula.dbName, 'memory', valid);
    expect(await memory.get('bad')).toBe(2);
    await rawPut(tabula.dbName, 'memory', { ...valid, ...corruption });
    const named = /^Row \["anonymous","s","m","bad"\] of IndexedDB table "memory" is corrupt/;
    for (const read of [
      () => memory.get('bad'),
      () => memory.keys(),
      () => memory.transact((tx) => tx.get('bad')),
      () => memory.transact((tx) => tx.keys()),
      () => memory.transact((tx) => tx.entries()),
      () => memory.transact((tx) => tx.entries('b')),
      // clear() reads the scope to know what to delete: refused whole, so the good key below is still there.
      () => memory.clear(),
    ]) {
      const error = await rejection(read());
      expect(error.code).toBe('schema/invalid');
      expect(error.message).toMatch(named);
    }
    // Rows outside the prefix are not validated: the good key still reads.
    expect(await memory.transact((tx) => tx.entries('go'))).toEqual([['good', 1]]);
    expect(await memory.get('good')).toBe(1);
    await tabula.close();
  });

  it('a failed storage read or write says which memory, key and session it was', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const memory = session.memory('m');
    await memory.set('k', 1);
    failStorage();
    const cases: [Promise<unknown>, string][] = [
      [memory.get('k'), 'read memory "m" of session "s"'],
      [memory.keys(), 'read memory "m" of session "s"'],
      [memory.set('k', 2), 'set key "k" in memory "m" of session "s"'],
      [memory.delete('k'), 'delete key "k" in memory "m" of session "s"'],
      [memory.clear(), 'clear in memory "m" of session "s"'],
      [memory.transact((tx) => tx.set('k', 3)), 'transact in memory "m" of session "s"'],
    ];
    for (const [call, what] of cases) {
      const error = await rejection(call);
      expect(error.code).toBe('storage/failed');
      expect(error.message).toContain(`Could not ${what}: `);
    }
    vi.restoreAllMocks();
    expect(await memory.get('k')).toBe(1);
    await tabula.close();
  });
});

describe('memory reads', () => {
  it('a key never set reads undefined, also inside transact()', async () => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory('m');
    expect(await memory.get('never')).toBeUndefined();
    expect(await memory.transact((tx) => tx.get('never'))).toBeUndefined();
    await tabula.close();
  });

  it('a deleted key is gone from get(), keys() and entries() inside transact(), while its neighbours stay', async () => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory('m');
    await memory.set('a', 1);
    await memory.set('b', 2);
    await memory.set('c', 3);
    await memory.delete('b');
    expect(await memory.transact(async (tx) => [await tx.get('b'), await tx.keys(), await tx.entries()])).toEqual([
      undefined,
      ['a', 'c'],
      [
        ['a', 1],
        ['c', 3],
      ],
    ]);
    await tabula.close();
  });
});

describe('memory.clear()', () => {
  it('with only deleted keys left writes nothing: no change is announced', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const memory = session.memory('m');
    await memory.set('a', 1);
    await memory.delete('a');
    const heard: SessionChange[] = [];
    session.subscribe((change) => heard.push(change));
    await memory.clear();
    // A local write announces itself before its promise resolves: nothing heard means nothing written.
    expect(heard).toEqual([]);
    await memory.set('b', 1);
    await memory.clear();
    expect(heard.map((change) => change.kinds)).toEqual([['memory.set'], ['memory.delete']]);
    await tabula.close();
  });
});

describe('transact(): appendMessages and removeMessages', () => {
  it('appendMessages refuses a non-array and names a bad message by its index; nothing of the transaction lands', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const memory = session.memory('m');
    const notArray = await rejection(memory.transact((tx) => tx.appendMessages({ role: 'user', content: 'x' } as never)));
    expect(notArray.code).toBe('argument/invalid');
    expect(notArray.message).toMatch(/^tx\.appendMessages\(messages\) in memory "m" of session "s" takes an array of messages, got /);
    const bad = await rejection(
      memory.transact(async (tx) => {
        await tx.set('k', 1);
        return tx.appendMessages([{ role: 'user', content: 'fine' }, { role: 'nobody', content: 'x' } as never]);
      }),
    );
    expect(bad.message).toContain('tx.appendMessages() in memory "m" of session "s": message[1]');
    expect(await memory.keys()).toEqual([]);
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });

  it('appendMessages returns the messages as stored, in order, with their ids', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stored = await session.memory('m').transact((tx) =>
      tx.appendMessages([
        { role: 'user', content: 'one' },
        { role: 'assistant', content: 'two' },
      ]),
    );
    expect(stored).toEqual(await session.messages());
    expect(stored.map((m) => m.content)).toEqual(['one', 'two']);
    await tabula.close();
  });

  it('removeMessages refuses a non-array and every id that cannot be a message id, naming its index; nothing is removed', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const memory = session.memory('m');
    const [kept] = await session.append({ role: 'user', content: 'kept' });
    const notArray = await rejection(memory.transact((tx) => tx.removeMessages(kept!.id as never)));
    expect(notArray.code).toBe('argument/invalid');
    expect(notArray.message).toMatch(/^tx\.removeMessages\(ids\) in memory "m" of session "s" takes an array of message ids, got /);
    for (const id of [7, '', 'i'.repeat(129)]) {
      const error = await rejection(memory.transact((tx) => tx.removeMessages([kept!.id, id as never])));
      expect(error.code).toBe('argument/invalid');
      expect(error.message).toMatch(/^tx\.removeMessages\(ids\) in memory "m" of session "s": ids\[1\] must be a message id \(a string of 1–128 characters/);
    }
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);
    // An unknown id of the longest valid length is accepted and ignored; a known one is removed.
    await memory.transact((tx) => tx.removeMessages(['i'.repeat(128)]));
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);
    await memory.transact((tx) => tx.removeMessages([kept!.id]));
    expect(await session.messages()).toEqual([]);
    await tabula.close();
  });
});
