/**
 * restore() takes only a checkpoint of its own session (src/store/session/copy.ts): the checkpoint
 * of another session of the same user is refused with checkpoint/not-found, and nothing changes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ApproxTokenCounter, isTabulaError } from '../../../../src/core/index.js';
import type { Tabula } from '../../../../src/index.js';
import { freshTabula } from '../helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});
async function open(): Promise<Tabula & { dbName: string }> {
  const tabula = await freshTabula({ userId: 'u', tokenCounter: new ApproxTokenCounter() });
  opened.push(tabula);
  return tabula;
}

describe('restore()', () => {
  it('refuses a checkpoint of another session, and changes nothing', async () => {
    const tabula = await open();
    const mine = await tabula.session('mine');
    const other = await tabula.session('other');
    await other.append({ role: 'user', content: 'theirs' });
    const foreign = await other.checkpoint('theirs');
    await mine.append({ role: 'user', content: 'mine' });
    const before = await mine.state();
    try {
      await mine.restore(foreign.id);
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'checkpoint/not-found')).toBe(true);
    }
    expect((await mine.messages()).map((m) => m.content)).toEqual(['mine']);
    expect((await mine.state()).version).toBe(before.version);
    // The same checkpoint restores its own session.
    await other.append({ role: 'user', content: 'later' });
    await other.restore(foreign.id);
    expect((await other.messages()).map((m) => m.content)).toEqual(['theirs']);
  });
});
