/**
 * A checkpoint too large for one op (issue 26, "Size") comes as its head
 * (`checkpoint.create` with a `count`) and `checkpoint.part` ops placing the
 * rest of its messages by position. Applied in the order sync delivers
 * them, with any of them applied again (a retry), with another split of
 * the same checkpoint mixed in (another device's re-upload), and with a
 * restore that comes before the checkpoint is whole, a replica ends with
 * the checkpoint row one op would have made, and the same session. Until it
 * is whole the checkpoint is not listed, and restoring it is refused.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckpointMessage, Op, OpBody } from '../../../../src/core/ops.js';
import { applyOps } from '../../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../../src/store/db/schema.js';
import { splitCheckpoint } from '../../../../src/store/replication/outbox.js';
import { fcParams } from '../../seed.js';
import { SESSION, USER, at, closeReplicas, create, op, openReplica, replica, snapshotOf, view } from '../replicas.js';

afterEach(closeReplicas);

const CHECKPOINT = 'cp1';

/** The session's n messages, appended at at(1)… at(n). */
function history(n: number): { ops: Op[]; messages: CheckpointMessage[] } {
  const messages = snapshotOf(Array.from({ length: n }, (_, i) => ({ id: `m${i}`, order: at(i + 1) }))).messages;
  return {
    messages,
    ops: [create(at(0)), ...messages.map((m) => op('message.append', m.order, { id: m.id, createdAt: m.createdAt, status: m.status, message: m.message }))],
  };
}

/** The checkpoint's head and parts, split after the positions in `cuts` (sorted, each in 1…n-1). */
function parted(messages: CheckpointMessage[], cuts: number[], order: string): Op[] {
  const { prefix, state } = snapshotOf([]);
  const bounds = [0, ...cuts, messages.length];
  const head: OpBody<'checkpoint.create'> = { id: CHECKPOINT, label: 'big', at: 5, snapshot: { prefix, state, messages: messages.slice(0, bounds[1]) }, count: messages.length };
  const parts = bounds.slice(1, -1).map((from, i) => op('checkpoint.part', at(500 + i), { id: CHECKPOINT, from, messages: messages.slice(from, bounds[i + 2]) }));
  return [op('checkpoint.create', order, head), ...parts];
}

/** The checkpoint as one op would have made it. */
function whole(messages: CheckpointMessage[], order: string): Op {
  const { prefix, state } = snapshotOf([]);
  return op('checkpoint.create', order, { id: CHECKPOINT, label: 'big', at: 5, snapshot: { prefix, state, messages } });
}

async function checkpointRows(name: string) {
  const db = createDb(name);
  try {
    return await db.checkpoints.toArray();
  } finally {
    db.close();
  }
}

/** What the public API shows, less the updated time (a part's own order key may be later than one op's). */
async function shown(name: string) {
  const seen = await view(name);
  if (!seen) return null;
  const { info: { updatedAt: _updatedAt, ...info }, ...rest } = seen;
  return { ...rest, info };
}

describe('a checkpoint in parts', () => {
  it('is listed and restorable only once whole, and a part applied twice adds nothing', async () => {
    const { ops, messages } = history(6);
    const [head, first, second] = parted(messages, [2, 4], at(100)) as [Op, Op, Op];
    const early = await replica(ops, [head, first, first]);
    expect((await checkpointRows(early.name))[0]?.pending).toMatchObject({ count: 6 });
    const tabula = await openReplica(early.name);
    const session = await tabula.session(SESSION);
    expect(await session.checkpoints()).toEqual([]);
    const refused = session.restore(CHECKPOINT);
    await expect(refused).rejects.toMatchObject({ code: 'checkpoint/incomplete', message: expect.stringMatching(/Checkpoint "cp1".*still arriving/) as unknown });
    await closeReplicas();

    const done = await replica(ops, [head, first, first], [second, second, first, head]);
    expect(done.applied.at(-1)?.map((o) => o.kind)).toEqual(['checkpoint.part']);
    const one = await replica(ops, [whole(messages, at(100))]);
    expect(await checkpointRows(done.name)).toEqual(await checkpointRows(one.name));
    expect(await shown(done.name)).toEqual(await shown(one.name));
  });

  it('a restore that comes before the checkpoint is whole waits for it, and is applied when the last part comes', async () => {
    const { ops, messages } = history(5);
    const [head, ...parts] = parted(messages, [1, 3], at(100));
    const restore = op('checkpoint.restore', at(200), { id: CHECKPOINT, version: 1, base: '' });
    const later = op('message.append', at(300), { id: 'after', createdAt: 1, status: 'complete', message: { role: 'user', content: 'after' } });
    const waiting = await replica(ops, [head as Op, restore, later]);
    // Not applied yet: the session is as it was, with the message written after it.
    expect((await shown(waiting.name))?.messages).toEqual([...messages.map((m) => `${m.id}:complete:${m.id}`), 'after:complete:after']);
    await closeReplicas();
    const late = await replica(ops, [head as Op, restore, later], parts);
    const inOrder = await replica(ops, [whole(messages, at(100)), restore, later]);
    expect(await shown(late.name)).toEqual(await shown(inOrder.name));
    expect((await shown(late.name))?.info.version).toBe(1);
  });

  it('goes with its session: a delete removes a checkpoint still arriving, and its late parts add nothing to the next life', async () => {
    const { ops, messages } = history(4);
    const [head, ...parts] = parted(messages, [2], at(100));
    const deleted = await replica(ops, [head as Op], [op('session.delete', at(150), {}), create(at(160))], parts);
    expect(await checkpointRows(deleted.name)).toEqual([]);
    expect(deleted.applied.at(-1)).toEqual([]);
  });

  it('the split: every op under the limit, the head first, the messages whole and in order', () => {
    const { prefix, state } = snapshotOf([]);
    const messages = Array.from({ length: 2000 }, (_, i) => ({ ...snapshotOf([{ id: `m${i}`, order: at(i) }]).messages[0]!, message: { role: 'user' as const, content: `${i} ${'é'.repeat(500)}` } }));
    const { create: head, parts } = splitCheckpoint({ userId: USER, sessionId: SESSION }, { id: CHECKPOINT, label: null, at: 1, prefix, state }, messages);
    expect(parts.length).toBeGreaterThan(1);
    expect(head.count).toBe(2000);
    const envelope = (body: unknown) => JSON.stringify({ id: 'x'.repeat(32), kind: 'checkpoint.part', userId: USER, sessionId: SESSION, order: at(0), body });
    for (const body of [head, ...parts]) expect(new TextEncoder().encode(envelope(body)).length).toBeLessThan(1024 * 1024 - 4096);
    expect([...head.snapshot.messages, ...parts.flatMap((part) => part.messages)]).toEqual(messages);
    expect(parts.map((part) => part.from)).toEqual(parts.map((_, i) => head.snapshot.messages.length + parts.slice(0, i).reduce((sum, p) => sum + p.messages.length, 0)));
    // A small checkpoint is one op, as before.
    expect(splitCheckpoint({ userId: USER, sessionId: SESSION }, { id: CHECKPOINT, label: null, at: 1, prefix, state }, messages.slice(0, 3))).toEqual({
      create: { id: CHECKPOINT, label: null, at: 1, snapshot: { prefix, state, messages: messages.slice(0, 3) } },
      parts: [],
    });
  });

  it('property: the head and parts in the order sync delivers them, any of them again, another split mixed in, a restore anywhere after the head, give what one op gives', async () => {
    const cutsArb = (n: number) => fc.uniqueArray(fc.integer({ min: 1, max: n - 1 }), { maxLength: Math.min(4, n - 1) }).map((cuts) => cuts.sort((a, b) => a - b));
    const caseArb = fc.integer({ min: 2, max: 9 }).chain((n) =>
      fc.record({
        n: fc.constant(n),
        cuts: cutsArb(n),
        other: fc.option(cutsArb(n), { nil: undefined }),
        repeats: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 6 }),
        restoreAt: fc.option(fc.nat(), { nil: undefined }),
        batches: fc.array(fc.nat(), { maxLength: 4 }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ n, cuts, other, repeats, restoreAt, batches }) => {
        const { ops, messages } = history(n);
        const first = parted(messages, cuts, at(100));
        // Another device's re-upload of the same checkpoint: its head at the same order key, split elsewhere.
        const second = other === undefined ? [] : parted(messages, other, at(100)).map((o) => ({ ...o, id: `${o.id}-again` }));
        const delivered: Op[] = [...first, ...second];
        // A retry delivers an op again, anywhere after the head.
        for (const [pick, place] of repeats) delivered.splice(1 + (place % delivered.length), 0, delivered[pick % delivered.length] as Op);
        const restore = op('checkpoint.restore', at(200), { id: CHECKPOINT, version: 1, base: '' });
        if (restoreAt !== undefined) delivered.splice(1 + (restoreAt % delivered.length), 0, restore);
        // In sync pulls (batches) cut anywhere.
        const cutAt = [...new Set(batches.map((b) => 1 + (b % delivered.length)))].sort((a, b) => a - b);
        const pulls = [0, ...cutAt].map((start, i) => delivered.slice(start, [...cutAt, delivered.length][i])).filter((pull) => pull.length > 0);
        const split = await replica(ops, ...pulls);
        const one = await replica(ops, [whole(messages, at(100)), ...(restoreAt === undefined ? [] : [restore])]);
        expect(await checkpointRows(split.name)).toEqual(await checkpointRows(one.name));
        expect(await shown(split.name)).toEqual(await shown(one.name));
        await closeReplicas();
      }),
      fcParams(40),
    );
  }, 120_000);
});

describe('a checkpoint in parts, applied as one batch in one transaction', () => {
  it('head and parts in one pull', async () => {
    const { ops, messages } = history(7);
    const name = (await replica(ops)).name;
    const db = createDb(name);
    const applied = await db.transaction('rw', sessionTables(db), () => applyOps(db, parted(messages, [3, 5], at(100))));
    db.close();
    expect(applied.map((o) => o.kind)).toEqual(['checkpoint.create', 'checkpoint.part', 'checkpoint.part']);
    expect((await view(name))?.checkpoints).toEqual([CHECKPOINT]);
  });
});
