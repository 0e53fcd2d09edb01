/**
 * A session's blackboard across its lives: a delete reaches every tab (two
 * Tabula instances on one database are two tabs), the old life's board is
 * closed there, and nothing of it reaches the session created again under
 * the same id, live or after a reopen.
 */
import { describe, expect, it } from 'vitest';
import { isTabulaError } from '../../../src/index.js';
import { freshTabula, uniqueName, waitFor } from '../store/helpers.js';
import { refusesAsDeleted } from './helpers.js';


describe('deleting a session reaches the blackboard in every tab', () => {
  it('closes the board of the deleted life in the other tab, and the new life starts empty (issue 10 item 1)', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    await Promise.all([a.blackboard.whenLoaded, b.blackboard.whenLoaded]);
    a.blackboard.set('secret', 'old life');
    await waitFor(() => b.blackboard.has('secret'));

    await tabA.deleteSession('s');
    // A deleted board refuses writes with session/not-found, not a raw InvalidStateError after applying them.
    expect(() => a.blackboard.set('late', 1)).toThrow(expect.objectContaining({ code: 'session/not-found' }) as Error);
    await waitFor(() => refusesAsDeleted(b.blackboard));
    expect(() => b.blackboard.observe(() => undefined)).toThrow(expect.objectContaining({ code: 'session/not-found' }) as Error);

    const again = await tabA.session('s');
    await again.blackboard.whenLoaded;
    // A third tab on the new life: once its write reaches A, the tabs have exchanged their state.
    const tabC = await freshTabula({ name });
    const c = await tabC.session('s');
    await c.blackboard.whenLoaded;
    c.blackboard.set('marker', 'new life');
    await waitFor(() => again.blackboard.has('marker'));
    expect(again.blackboard.toJSON()).toEqual({ marker: 'new life' });
    await again.blackboard.flushed();
    await Promise.all([tabA.close(), tabB.close(), tabC.close()]);

    const reopenedA = await freshTabula({ name });
    const reopenedB = await freshTabula({ name });
    const [ra, rb] = await Promise.all([reopenedA.session('s'), reopenedB.session('s')]);
    await Promise.all([ra.blackboard.whenLoaded, rb.blackboard.whenLoaded]);
    expect(ra.blackboard.toJSON()).toEqual({ marker: 'new life' });
    expect(rb.blackboard.toJSON()).toEqual({ marker: 'new life' });
    expect(reopenedA.reported.filter((e) => !isTabulaError(e))).toEqual([]);
    await Promise.all([reopenedA.close(), reopenedB.close()]);
  });

  it('keeps the old life out of the new one when the other tab writes after the delete', async () => {
    const name = uniqueName();
    const tabA = await freshTabula({ name });
    const tabB = await freshTabula({ name });
    const b = await tabB.session('s');
    await b.blackboard.whenLoaded;
    b.blackboard.set('before', 1);
    await b.blackboard.flushed();
    await tabA.deleteSession('s');
    const again = await tabA.session('s');
    await again.blackboard.whenLoaded;
    await waitFor(() => refusesAsDeleted(b.blackboard));
    expect(again.blackboard.toJSON()).toEqual({});
    // Nothing the other tab reported is a raw error.
    expect(tabB.reported.filter((e) => !isTabulaError(e))).toEqual([]);
    await Promise.all([tabA.close(), tabB.close()]);
  });

  it('a closed session handle: observe() throws storage/closed, its listeners stop, flushed() says why (issue 10 item 13)', async () => {
    const tabula = await freshTabula();
    const first = await tabula.session('s');
    const second = await tabula.session('s');
    await first.blackboard.whenLoaded;
    const seen: string[] = [];
    first.blackboard.observe((changes) => seen.push(...changes.map((c) => c.key)));
    second.blackboard.set('before', 1);
    await first.close();
    expect(() => first.blackboard.observe(() => seen.push('late'))).toThrow(expect.objectContaining({ code: 'storage/closed' }) as Error);
    await expect(first.blackboard.flushed()).rejects.toMatchObject({ code: 'storage/closed' });
    second.blackboard.set('after', 2);
    expect(seen).toEqual(['before']);
    await tabula.deleteSession('s');
    await expect(second.blackboard.flushed()).rejects.toMatchObject({ code: 'session/not-found' });
    await tabula.close();
  });
});
