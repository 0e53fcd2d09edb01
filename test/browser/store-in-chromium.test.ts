/**
 * What only a real browser has: the StorageManager, and IndexedDB shared
 * by every Tabula instance of the origin. The full store suite also runs
 * in this project (see vite.config.ts).
 */
import { describe, expect, it } from 'vitest';
import { openTabula, type SessionChange } from '../../src/index.js';

const name = () => `browser-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

describe('store in Chromium', () => {
  it('reports real storage usage and quota', async () => {
    const tabula = await openTabula({ name: name() });
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'x'.repeat(10_000) });
    const storage = await tabula.storage();
    expect(storage.quota).toBeGreaterThan(0);
    expect(storage.usage).toBeGreaterThanOrEqual(0);
    expect(storage.usage).toBeLessThanOrEqual(storage.quota);
    expect(typeof storage.persisted).toBe('boolean');
    expect(typeof (await tabula.requestPersistence())).toBe('boolean');
    await tabula.close();
  });

  it('a second instance on the same database sees writes and gets change events', async () => {
    const dbName = name();
    const a = await openTabula({ name: dbName, userId: 'u' });
    const b = await openTabula({ name: dbName, userId: 'u' });
    const inA = await a.session('shared');
    const inB = await b.session('shared');
    // A's session('shared') broadcast a session.create that may reach B only after B subscribed:
    // the assertion is about the append's event.
    const changes: SessionChange[] = [];
    inB.subscribe((change) => changes.push(change));
    await inA.append({ role: 'user', content: 'from A' });
    const appends = () => changes.filter((change) => change.kinds.includes('message.append'));
    await expect.poll(() => appends().map((change) => change.origin)).toEqual(['tab']);
    expect(changes.every((change) => change.origin === 'tab')).toBe(true);
    expect((await inB.messages()).map((m) => m.content)).toEqual(['from A']);
    await a.close();
    await b.close();
  });
});
