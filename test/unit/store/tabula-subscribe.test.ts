/** tabula.subscribe(): every session's changes, from this instance and from another tab. */
import { describe, expect, it } from 'vitest';
import { isTabulaError, type SessionChange } from '../../../src/index.js';
import { freshTabula, waitFor } from './helpers.js';

describe('tabula.subscribe', () => {
  it('hears every session of this tab and of another tab, until unsubscribed', async () => {
    const a = await freshTabula();
    const b = await freshTabula({ name: a.dbName });
    const heard: Pick<SessionChange, 'sessionId' | 'origin'>[] = [];
    const stop = a.subscribe(({ sessionId, origin }) => heard.push({ sessionId, origin }));
    await (await a.session('one')).append({ role: 'user', content: 'hi' });
    await b.session('two');
    await waitFor(() => heard.some((c) => c.sessionId === 'two'));
    expect(heard).toEqual([
      { sessionId: 'one', origin: 'local' },
      { sessionId: 'one', origin: 'local' },
      { sessionId: 'two', origin: 'tab' },
    ]);
    stop();
    await a.deleteSession('one');
    expect(heard).toHaveLength(3);
    await Promise.all([a.close(), b.close()]);
    expect(() => a.subscribe(() => undefined)).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
  });

  it('a write in flight when close() runs either lands and resolves, heard by the other tab, or rejects with a TabulaError and lands nothing', async () => {
    // The bug: the write committed, then announcing it on the channel close() had just closed threw a raw
    // InvalidStateError, so the caller was told a write failed that had landed.
    const a = await freshTabula();
    const b = await freshTabula({ name: a.dbName });
    const heard: string[] = [];
    b.subscribe(({ sessionId }) => heard.push(sessionId));
    const session = await a.session('s');
    const outcome = session.append({ role: 'user', content: 'in flight' }).then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await a.close();
    const result = await outcome;
    const stored = (await (await b.session('s')).messages()).map((m) => m.content);
    if (result === 'resolved') {
      expect(stored).toEqual(['in flight']);
      await waitFor(() => heard.length >= 2);
    } else {
      expect(isTabulaError(result)).toBe(true);
      expect(stored).toEqual([]);
    }
    await b.close();
  });
});
