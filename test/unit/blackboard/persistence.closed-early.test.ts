/**
 * A board closed, or its session deleted (here or in another tab), while
 * its database is still loading: `whenLoaded` and `flushed()` settle instead
 * of waiting forever (y-indexeddb never says 'synced' once destroyed). One
 * example per way in, then a seeded property that interleaves acquires,
 * writes, releases, deletes and closes of two tabs at random points and
 * checks that every promise a caller can await settles, and rejects only
 * with a TabulaError. TABULA_SEED=n replays a reported seed.
 */
import * as fc from 'fast-check';
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { persistDoc } from '../../../src/blackboard/persistence.js';
import { createBoardRegistry } from '../../../src/blackboard/registry.js';
import { isTabulaError, type TabulaError } from '../../../src/index.js';
import { fcParams } from '../seed.js';
import { freshTabula, uniqueName } from '../store/helpers.js';

describe('a board closed or deleted while it loads', () => {
  it('persistence: whenLoaded resolves and flushed() rejects with storage/closed when close() comes first', async () => {
    const name = uniqueName('early');
    const persistence = persistDoc(name, new Y.Doc(), { onError: () => undefined });
    const flushed = expect(persistence.flushed()).rejects.toMatchObject({ code: 'storage/closed', message: `The blackboard database "${name}" was closed before it loaded.` });
    await persistence.close();
    await expect(persistence.whenLoaded).resolves.toBeUndefined();
    await flushed;
  });

  it('registry: deleted here, deleted in another tab, or the registry closed, before the board loaded', async () => {
    const name = uniqueName('early');
    const here = createBoardRegistry({ name, peerId: 'a', onError: () => undefined });
    const there = createBoardRegistry({ name, peerId: 'b', onError: () => undefined });
    const own = here.acquire('u', 's').blackboard;
    own.set('k', 1);
    await Promise.resolve();
    await here.destroy('u', 's', '');
    await expect(own.whenLoaded).resolves.toBeUndefined();
    await expect(own.flushed()).rejects.toMatchObject({ code: 'session/not-found' });

    const theirs = there.acquire('u', 't').blackboard;
    await here.destroy('u', 't', '');
    await expect(theirs.whenLoaded).resolves.toBeUndefined();

    const closing = here.acquire('u', 'v').blackboard;
    await here.close();
    await expect(closing.whenLoaded).resolves.toBeUndefined();
    await expect(closing.flushed()).rejects.toMatchObject({ code: 'storage/closed' });
    await there.close();
  });

  it('through openTabula: a session deleted right after it was opened', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await tabula.deleteSession('s');
    await expect(session.blackboard.whenLoaded).resolves.toBeUndefined();
    await expect(session.blackboard.flushed()).rejects.toMatchObject({ code: 'session/not-found' });
    await tabula.close();
  });

  type Command =
    | { kind: 'acquire'; tab: number; session: number }
    | { kind: 'set'; lease: number }
    | { kind: 'flush'; lease: number }
    | { kind: 'release'; lease: number }
    | { kind: 'destroy'; tab: number; session: number }
    | { kind: 'wait'; turns: number };

  const tab = fc.integer({ min: 0, max: 1 });
  const session = fc.integer({ min: 0, max: 1 });
  const lease = fc.nat({ max: 7 });
  const command: fc.Arbitrary<Command> = fc.oneof(
    fc.record({ kind: fc.constant('acquire' as const), tab, session }),
    fc.record({ kind: fc.constant('set' as const), lease }),
    fc.record({ kind: fc.constant('flush' as const), lease }),
    fc.record({ kind: fc.constant('release' as const), lease }),
    fc.record({ kind: fc.constant('destroy' as const), tab, session }),
    fc.record({ kind: fc.constant('wait' as const), turns: fc.integer({ min: 0, max: 3 }) }),
  );

  it('property: every whenLoaded, flushed() and release() settles, and rejects only with a TabulaError', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 14 }), fc.boolean(), async (commands, closeFirst) => {
        const name = uniqueName('early-prop');
        const errors: TabulaError[] = [];
        const tabs = [0, 1].map((i) => createBoardRegistry({ name, peerId: `t${i}`, onError: (e) => errors.push(e) }));
        const leases: ReturnType<(typeof tabs)[number]['acquire']>[] = [];
        const awaited: Promise<unknown>[] = [];
        for (const c of commands) {
          const held = 'lease' in c ? leases[c.lease % Math.max(1, leases.length)] : undefined;
          if (c.kind === 'acquire') {
            const acquired = tabs[c.tab]!.acquire('u', `s${c.session}`);
            leases.push(acquired);
            awaited.push(acquired.blackboard.whenLoaded);
          } else if (c.kind === 'set' && held) {
            try {
              held.blackboard.set('k', leases.indexOf(held));
            } catch (error) {
              expect(isTabulaError(error), String(error)).toBe(true);
            }
          } else if (c.kind === 'flush' && held) awaited.push(held.blackboard.flushed());
          else if (c.kind === 'release' && held) awaited.push(held.release());
          else if (c.kind === 'destroy') awaited.push(tabs[c.tab]!.destroy('u', `s${c.session}`, ''));
          else if (c.kind === 'wait') for (let i = 0; i < c.turns; i++) await new Promise<void>((resolve) => setTimeout(resolve, 0)); // one macrotask turn (IndexedDB events run between)
        }
        // Closing a tab is the last thing that may happen while boards load.
        if (closeFirst) awaited.push(tabs[0]!.close());
        const outcomes = await Promise.allSettled(awaited);
        for (const outcome of outcomes) {
          if (outcome.status === 'rejected') expect(isTabulaError(outcome.reason), String(outcome.reason)).toBe(true);
        }
        await Promise.all(tabs.map((t) => t.close()));
        expect(errors.filter((e) => !isTabulaError(e))).toEqual([]);
      }),
      fcParams(40),
    );
  }, 120_000);
});
