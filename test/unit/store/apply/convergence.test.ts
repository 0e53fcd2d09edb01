/**
 * The convergence rules (docs/architecture.md, Convergence) on the cases that diverged before
 * (the property test in idempotence.property.test.ts covers the whole class):
 * an update before its append, a commit before its journal entries, two
 * devices saving the same version. Ops are applied to a database the way
 * the sync client does, then read back through the public API.
 */
import { describe, expect, it } from 'vitest';
import { createHlc, type Op, type OpBody, type OpKind } from '../../../../src/core/index.js';
import { subOrder } from '../../../../src/core/hlc.js';
import { applyOps, type SaveConflict } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { freshTabula, uniqueName } from '../helpers.js';

function writer(clientId: string) {
  const clock = createHlc({ clientId, wallClock: () => 1_700_000_000_000 });
  let seq = 0;
  return <K extends OpKind>(kind: K, body: OpBody<K>): Op =>
    ({ id: `${clientId}-${++seq}`, kind, userId: 'u', sessionId: 's', order: clock.now(), body }) as Op;
}

async function apply(db: TabulaDb, ops: Op[], conflicts?: SaveConflict[]): Promise<void> {
  await db.transaction('rw', sessionTables(db), async () => {
    await applyOps(db, ops, conflicts ? { conflicts } : {});
  });
}

/** Applies `ops` in the order given to a fresh database and reads the session through openTabula. */
async function replica(ops: Op[], conflicts?: SaveConflict[]) {
  const name = uniqueName('replica');
  const db = createDb(name);
  await apply(db, ops, conflicts);
  db.close();
  const tabula = await freshTabula({ name, userId: 'u' });
  const session = await tabula.session('s');
  return { tabula, session };
}

describe('applyOp converges whatever the order', () => {
  it('a message.update that arrives before its append keeps the final text, not streaming', async () => {
    const op = writer('a');
    const create = op('session.create', { createdAt: 1, forkOf: null });
    const append = op('message.append', { id: 'm', createdAt: 5, status: 'streaming', message: { role: 'assistant', content: '' } });
    const at = { order: append.order, createdAt: 5 };
    const partial = op('message.update', { id: 'm', status: 'streaming', message: { role: 'assistant', content: 'Hel' }, ...at });
    const done = op('message.update', { id: 'm', status: 'complete', message: { role: 'assistant', content: 'Hello' }, ...at });
    for (const order of [[create, append, partial, done], [create, done, partial, append], [create, partial, done, append, done]]) {
      const { tabula, session } = await replica(order);
      const [message, ...rest] = await session.messages();
      expect(rest).toEqual([]);
      expect(message).toMatchObject({ id: 'm', order: append.order, createdAt: 5, status: 'complete', content: 'Hello' });
      expect(await session.messageCount()).toBe(1);
      await tabula.close();
    }
  });

  it('a journal.commit that arrives before its journal.append still moves the watermark', async () => {
    const op = writer('a');
    const create = op('session.create', { createdAt: 1, forkOf: null });
    const entries = op('journal.append', { entries: [1, 2, 3] });
    const commit = op('journal.commit', { watermark: 3, through: subOrder(entries.order, 2) });
    const { tabula, session } = await replica([create, commit, entries]);
    expect(await session.journal.diff()).toEqual([]);
    expect(await session.journal.view()).toEqual([1, 2, 3]);
    await tabula.close();
  });

  it('two devices saving the same version converge on the higher order, and the replaced save is reported', async () => {
    const a = writer('device-a');
    const b = writer('device-b');
    const create = a('session.create', { createdAt: 1, forkOf: null });
    const state = { summary: null, plan: null, permissions: null, tools: [], context: {} };
    b('session.create', { createdAt: 1, forkOf: null }); // device-b's own create: its clock is now level with a's
    const fromA = a('state.save', { version: 1, patch: { ...state, tasks: 'from a' } });
    const fromB = b('state.save', { version: 1, patch: { ...state, tasks: 'from b' } });
    // Same HLC wall and counter: device-b's clientId sorts after device-a's, so b's save wins everywhere.
    expect(fromB.order > fromA.order).toBe(true);
    const conflicts: SaveConflict[] = [];
    const onA = await replica([create, fromA, fromB, fromA], conflicts);
    const onB = await replica([create, fromB, fromA]);
    for (const { session } of [onA, onB]) expect(await session.state()).toMatchObject({ version: 1, tasks: 'from b' });
    expect(conflicts).toEqual([
      {
        userId: 'u',
        sessionId: 's',
        lost: { version: 1, order: fromA.order, state: { ...state, tasks: 'from a' } },
        won: { version: 1, order: fromB.order, state: { ...state, tasks: 'from b' } },
      },
    ]);
    await onA.tabula.close();
    await onB.tabula.close();
  });

  it('a save keeps the summary a clear ordered after it dropped, in either order', async () => {
    const op = writer('a');
    const create = op('session.create', { createdAt: 1, forkOf: null });
    const save = op('state.save', { version: 1, patch: { summary: 'old', tasks: 't', plan: null, permissions: null, tools: [], context: {} } });
    const clear = op('session.clear', {});
    for (const order of [[create, save, clear], [create, clear, save]]) {
      const { tabula, session } = await replica(order);
      expect(await session.state()).toMatchObject({ version: 1, summary: null, tasks: 't' });
      await tabula.close();
    }
  });
});
