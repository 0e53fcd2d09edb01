/**
 * A session's blackboard opens on first use: messages, state and a new
 * Tabula instance cost no blackboard database (nor its channel), and the
 * board still works, persists and refuses use after close() once touched.
 */
import { describe, expect, it } from 'vitest';
import { TabulaError } from '../../../../src/index.js';
import { freshTabula } from '../helpers.js';

/** Names of the IndexedDB databases that belong to Tabula `name` (its own and its blackboards'). */
async function databasesOf(name: string): Promise<string[]> {
  const all = await indexedDB.databases();
  return all
    .map((db) => db.name ?? '')
    .filter((dbName) => dbName === name || dbName.includes(encodeURIComponent(name)))
    .sort();
}

describe('session blackboard opens only when used', () => {
  it('messages, state and reopening open no blackboard database; the first use does, and it persists', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append([{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }]);
    expect(await session.messages({ last: 1 })).toHaveLength(1);
    await session.state();
    await session.close();
    const again = await tabula.session('s');
    expect(await again.messageCount()).toBe(2);
    expect(await databasesOf(tabula.dbName)).toEqual([tabula.dbName]);

    await again.blackboard.whenLoaded;
    again.blackboard.set('plan', 'ship it');
    await again.blackboard.flushed();
    const names = await databasesOf(tabula.dbName);
    expect(names).toHaveLength(2);
    await tabula.close();

    const reopened = await freshTabula({ name: tabula.dbName });
    const board = (await reopened.session('s')).blackboard;
    await board.whenLoaded;
    expect(board.get('plan')).toBe('ship it');
    await reopened.close();
  });

  it('a board first touched after close() refuses use and holds nothing open', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.close();
    let caught: unknown;
    try {
      session.blackboard.set('k', 1);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(TabulaError);
    expect((caught as TabulaError).code).toBe('storage/closed');
    await tabula.close();
  });
});
