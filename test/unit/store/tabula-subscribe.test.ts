/** tabula.subscribe(): every session's changes, from this instance and from another tab. */
import { describe, expect, it } from 'vitest';
import type { SessionChange } from '../../../src/index.js';
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
});
