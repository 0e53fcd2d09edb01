/**
 * The one write path through the public API (src/store/writer.ts): a tab whose clock is behind still
 * appends after what it has seen (another device's key an hour ahead, another tab's messages); a write
 * that changes nothing announces nothing; writes to a deleted session or a closed Tabula, and an op of
 * an unknown kind, are refused with errors that name them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ApproxTokenCounter, type Op } from '../../../src/core/index.js';
import { formatHlc, parseHlc } from '../../../src/core/hlc.js';
import type { Tabula } from '../../../src/index.js';
import { applyOps } from '../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../src/store/db/schema.js';
import { freshTabula } from './helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});
async function open(): Promise<Tabula & { dbName: string }> {
  const tabula = await freshTabula({ userId: 'u', tokenCounter: new ApproxTokenCounter() });
  opened.push(tabula);
  return tabula;
}

describe('a tab whose clock is behind', () => {
  it('appends after messages it has already seen, even ones stamped an hour ahead', async () => {
    const tabula = await open();
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'first' });
    // Another device (or tab) with a clock an hour ahead wrote a message; it reached this database.
    const aheadOrder = formatHlc({ wallMs: Date.now() + 3_600_000, counter: 7, clientId: 'ahead' });
    const db = createDb(tabula.dbName);
    const remote: Op = { id: 'remote', kind: 'message.append', userId: 'u', sessionId: 's', order: aheadOrder, body: { id: 'from-ahead', createdAt: 1, status: 'complete', message: { role: 'assistant', content: 'ahead' } } };
    await db.transaction('rw', sessionTables(db), async () => applyOps(db, [remote]));
    db.close();

    const stored = await session.append([{ role: 'user', content: 'second' }, { role: 'user', content: 'third' }]);
    expect((await session.messages()).map((m) => m.content)).toEqual(['first', 'ahead', 'second', 'third']);
    for (const message of stored) expect(message.order > aheadOrder).toBe(true);
    expect(parseHlc(stored[0]!.order).wallMs).toBeGreaterThanOrEqual(parseHlc(aheadOrder).wallMs);
    // Every later write of the session follows too: a note, and another append.
    await session.note('after');
    const [later] = await session.append({ role: 'user', content: 'fourth' });
    expect(later!.order > stored[1]!.order).toBe(true);
  });

  it('a second Tabula on the same database (another tab) appends after the first one\'s messages', async () => {
    const first = await open();
    const second = await freshTabula({ name: first.dbName, userId: 'u', tokenCounter: new ApproxTokenCounter() });
    opened.push(second);
    const a = await first.session('s');
    const b = await second.session('s');
    for (let i = 0; i < 5; i++) {
      await a.append({ role: 'user', content: `a${i}` });
      await b.append({ role: 'user', content: `b${i}` });
    }
    expect((await a.messages()).map((m) => m.content)).toEqual(['a0', 'b0', 'a1', 'b1', 'a2', 'b2', 'a3', 'b3', 'a4', 'b4']);
  });
});

describe('the write path\'s own guards', () => {
  it('a write that changes nothing announces nothing; one that does, announces its kinds', async () => {
    const session = await (await open()).session('s');
    const kinds: string[][] = [];
    session.subscribe((change) => kinds.push([...change.kinds]));
    await session.journal.record('e');
    await session.journal.markCommitted();
    await session.journal.markCommitted(); // already committed: no op applies
    await session.note('after');
    expect(kinds).toEqual([['journal.append'], ['journal.commit'], ['note.add']]);
  });

  it('writes to a deleted session or a closed Tabula fail with errors that name them', async () => {
    const tabula = await open();
    const session = await tabula.session('gone');
    await tabula.deleteSession('gone');
    await expect(session.append({ role: 'user', content: 'x' })).rejects.toMatchObject({ code: 'session/not-found', message: expect.stringContaining('"gone"') as unknown });
    const other = await tabula.session('open');
    await tabula.close();
    opened.pop();
    await expect(other.note('x')).rejects.toMatchObject({ code: 'storage/closed', message: expect.stringContaining(`"${tabula.dbName}" is closed`) as unknown });
  });

  it('an op of an unknown kind is refused with a TabulaError naming it', async () => {
    const tabula = await open();
    await tabula.session('s');
    const db = createDb(tabula.dbName);
    const bogus = { id: 'x', kind: 'session.rename', userId: 'u', sessionId: 's', order: formatHlc({ wallMs: Date.now() + 1000, counter: 0, clientId: 'z' }), body: {} } as unknown as Op;
    await expect(db.transaction('rw', sessionTables(db), async () => applyOps(db, [bogus]))).rejects.toMatchObject({
      code: 'argument/invalid',
      message: expect.stringContaining('op kind') as unknown,
    });
    db.close();
  });
});
