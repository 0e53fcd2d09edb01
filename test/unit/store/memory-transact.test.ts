/**
 * memory.transact(): several keys read and written in one transaction, all
 * or nothing, serialised against every other write to the session. The
 * integrations (LangGraph checkpoints, Agents history transactions) rely on it.
 */
import { describe, expect, it } from 'vitest';
import { freshTabula } from './helpers.js';

describe('memory.transact', () => {
  it('writes several keys at once and returns what fn returns', async () => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory('m');
    await memory.set('gone', 1);
    const result = await memory.transact(async (tx) => {
      await tx.set('a', { n: 1 });
      await tx.set('b', [1, 2]);
      await tx.delete('gone');
      expect(await tx.get('a')).toEqual({ n: 1 });
      expect(await tx.entries()).toEqual([
        ['a', { n: 1 }],
        ['b', [1, 2]],
      ]);
      expect(await tx.entries('b')).toEqual([['b', [1, 2]]]);
      return tx.keys();
    });
    expect(result).toEqual(['a', 'b']);
    expect(await memory.keys()).toEqual(['a', 'b']);
    await tabula.close();
  });

  it('writes nothing when fn throws, and rethrows', async () => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory('m');
    await memory.set('a', 1);
    await expect(
      memory.transact(async (tx) => {
        await tx.set('a', 2);
        await tx.set('b', 2);
        throw new Error('precondition failed');
      }),
    ).rejects.toThrow('precondition failed');
    expect(await memory.get('a')).toBe(1);
    expect(await memory.keys()).toEqual(['a']);
    await tabula.close();
  });

  it('serialises read-modify-write: concurrent increments from two instances lose nothing', async () => {
    const a = await freshTabula();
    const b = await freshTabula({ name: a.dbName });
    const [ma, mb] = [(await a.session('s')).memory('m'), (await b.session('s')).memory('m')];
    const increment = (memory: typeof ma) =>
      memory.transact(async (tx) => {
        await tx.set('n', ((await tx.get<number>('n')) ?? 0) + 1);
      });
    await Promise.all(Array.from({ length: 20 }, (_, i) => increment(i % 2 ? ma : mb)));
    expect(await ma.get('n')).toBe(20);
    await Promise.all([a.close(), b.close()]);
  });

  it('checks keys and values like set()', async () => {
    const tabula = await freshTabula();
    const memory = (await tabula.session('s')).memory('m');
    await expect(memory.transact((tx) => tx.set('', 1))).rejects.toMatchObject({ code: 'memory/bad-key' });
    await expect(memory.transact((tx) => tx.set('k', null))).rejects.toMatchObject({ code: 'memory/bad-value' });
    await tabula.close();
  });
});
