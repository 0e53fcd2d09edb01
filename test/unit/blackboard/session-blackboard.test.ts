import { describe, expect, it } from 'vitest';
import { persistDoc } from '../../../src/blackboard/persistence.js';
import type { BlackboardChange } from '../../../src/index.js';
import { blackboardDatabaseName } from '../../../src/blackboard/lives.js';
import * as Y from 'yjs';
import { freshTabula, uniqueName, waitFor } from '../store/helpers.js';

/** The names of the blackboard databases (one per life) of session `sessionId`. */
async function boardDatabases(name: string, sessionId: string): Promise<string[]> {
  const prefix = blackboardDatabaseName(name, 'anonymous', sessionId).replace(/blackboard$/, '');
  const all = await indexedDB.databases();
  return all.map((db) => db.name ?? '').filter((n) => n.startsWith(prefix) && n.endsWith(':blackboard'));
}

/** What the blackboard database holds: its row count, bytes, and the board it loads into. */
async function stored(name: string): Promise<{ rows: number; bytes: number; board: Record<string, unknown> }> {
  const doc = new Y.Doc();
  const persistence = persistDoc(name, doc, { onError: () => undefined, compactAboveRows: Number.MAX_SAFE_INTEGER });
  await persistence.whenLoaded;
  const size = await persistence.size();
  const board = doc.getMap('blackboard').toJSON();
  await persistence.close();
  return { ...size, board };
}

describe('session.blackboard', () => {
  it('is durable once flushed() resolves and loads back after a reopen', async () => {
    const name = uniqueName();
    const first = await freshTabula({ name });
    const session = await first.session('s');
    await session.blackboard.whenLoaded;
    session.blackboard.update({ goal: 'plan a trip', budget: 1200 });
    await session.blackboard.flushed();
    await first.close();

    const second = await freshTabula({ name });
    const again = await second.session('s');
    await again.blackboard.whenLoaded;
    expect(again.blackboard.toJSON()).toEqual({ budget: 1200, goal: 'plan a trip' });
    await second.close();
  });

  it('two handles of one session share one live board', async () => {
    const tabula = await freshTabula();
    const a = await tabula.session('s');
    const b = await tabula.session('s');
    a.blackboard.set('k', 1);
    expect(b.blackboard.get('k')).toBe(1);
    await a.close();
    b.blackboard.set('k', 2);
    expect(b.blackboard.get('k')).toBe(2);
    expect(() => a.blackboard.set('k', 3)).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
    await b.close();
    expect(() => b.blackboard.set('k', 4)).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
    await tabula.close();
  });

  it('reaches another tab (another Tabula on the same database), reported as origin tab', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    await Promise.all([a.blackboard.whenLoaded, b.blackboard.whenLoaded]);
    const seen: BlackboardChange[] = [];
    b.blackboard.observe((changes) => seen.push(...changes));
    a.blackboard.set('from', 'A');
    await waitFor(() => b.blackboard.has('from'));
    expect(b.blackboard.get('from')).toBe('A');
    expect(seen).toContainEqual({ key: 'from', value: 'A', origin: 'tab' });
    await tabA.close();
    await tabB.close();
  });

  it('is the scratchpad axis of toContext() and freeze(), and takes a context’s changes back with update()', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    session.blackboard.set('plan', ['flights']);
    const ctx = await session.toContext();
    expect(ctx.scratchpad()).toEqual({ plan: ['flights'] });
    ctx.set('plan', ['flights', 'hotel']);
    session.blackboard.update(ctx.scratchpad());
    expect((await session.freeze()).scratchpad).toEqual([['plan', ['flights', 'hotel']]]);
    await tabula.close();
  });

  it('forks and exports with the session', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    session.blackboard.set('shared', { v: 1 });
    const fork = await session.fork('s2');
    await fork.blackboard.whenLoaded;
    expect(fork.blackboard.toJSON()).toEqual({ shared: { v: 1 } });
    fork.blackboard.set('shared', { v: 2 });
    expect(session.blackboard.get('shared')).toEqual({ v: 1 });
    expect((await session.export()).blackboard).toEqual({ shared: { v: 1 } });
    await tabula.close();
  });

  it('opening and closing a session many times does not grow the stored document', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    session.blackboard.update({ a: 'x'.repeat(200), b: [1, 2, 3] });
    await session.blackboard.flushed();
    await session.close();
    const [dbName] = await boardDatabases(name, 's');
    if (dbName === undefined) throw new Error('the session has no blackboard database');
    const baseline = await stored(dbName);
    expect(baseline.board).toEqual({ a: 'x'.repeat(200), b: [1, 2, 3] });
    for (let i = 0; i < 60; i++) {
      const reopened = await tabula.session('s');
      await reopened.blackboard.whenLoaded;
      await reopened.blackboard.flushed();
      await reopened.close();
    }
    const after = await stored(dbName);
    // Without compaction every open adds a row; with it the log stays bounded and holds one copy of the state.
    expect(after.rows).toBeLessThanOrEqual(21);
    expect(after.bytes).toBeLessThan(baseline.bytes + 21 * 16);
    const check = await tabula.session('s');
    await check.blackboard.whenLoaded;
    expect(check.blackboard.toJSON()).toEqual({ a: 'x'.repeat(200), b: [1, 2, 3] });
    await tabula.close();
  });

  it('deleting a session deletes its blackboard database', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    session.blackboard.set('secret', 1);
    await session.blackboard.flushed();
    expect(await boardDatabases(name, 's')).toHaveLength(1);
    await tabula.deleteSession('s');
    expect(await boardDatabases(name, 's')).toEqual([]);
    const recreated = await tabula.session('s');
    await recreated.blackboard.whenLoaded;
    expect(recreated.blackboard.toJSON()).toEqual({});
    await tabula.close();
  });
});
