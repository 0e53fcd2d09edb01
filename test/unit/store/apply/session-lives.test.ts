/**
 * Session lives in the one write path (src/store/apply/lives.ts): every op names the life of its
 * session it was written in (`Op.after`, the delete that life began after), so an op of an old life
 * never lands in a new one, whatever order sync delivers the ops in, and an op of a newer life ends
 * the life a replica holds. Each scenario applies the same ops to replicas in order-key order and late
 * (`converge`) and checks the value the rule exists for. Split from out-of-order.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Op } from '../../../../src/core/index.js';
import { append, at, closeReplicas, converge, create, memorySet, op, prefix, save, snapshotOf } from '../replicas.js';

afterEach(closeReplicas);

describe('applyOps: session lives (ops name the life they were written in)', () => {
  /** `o` as written in the life that began after the delete at `after` ('' for the first life). */
  const inLife = (after: string, o: Op): Op => ({ ...o, after });
  const del = (order: string, after: string) => inLife(after, op('session.delete', order, {}));

  // The bug: device a deletes the session and creates it again; device b, which has not heard of the
  // delete, appends to the old life, ordered after the new create. In order-key order the append landed
  // in the new life; on b (append, then delete and create) the delete took it away: replicas diverged.
  it('an append to the old life from another device is dropped whatever the order', async () => {
    const { expected, late } = await converge([
      [inLife('', create(at(1))), inLife('', append(at(5, 'b'), 'from b'))],
      [del(at(3), ''), inLife(at(3), create(at(4))), inLife(at(3), append(at(6), 'new life'))],
    ]);
    expect(expected?.messages).toEqual(['new life:complete:new life']);
    expect(late.applied[0]).toHaveLength(2);
  });

  it('concurrent deletes on two devices, each followed by a create: the later delete\'s life is the one left', async () => {
    const a = [del(at(3), ''), inLife(at(3), create(at(4))), inLife(at(3), append(at(5), 'a new')), inLife(at(3), memorySet(at(8), 'k', 1))];
    const b = [del(at(6, 'b'), ''), inLife(at(6, 'b'), create(at(7, 'b'))), inLife(at(6, 'b'), append(at(9, 'b'), 'b new'))];
    const first = [inLife('', create(at(1))), inLife('', append(at(2), 'old'))];
    const { expected } = await converge([first, a, b]);
    expect(expected?.messages).toEqual(['b new:complete:b new']);
    expect(expected?.memory).toEqual({});
    // Delivered the other way round, and interleaved op by op.
    await converge([first, b, a]);
    await converge([first, [a[0]!, b[0]!, b[1]!, a[1]!, a[2]!, b[2]!, a[3]!]]);
  });

  it('memory, notes, journal, prefix and state written to an old life never reach the new one', async () => {
    const old = [
      inLife('', memorySet(at(5, 'b'), 'k', 1)),
      inLife('', op('note.add', at(6, 'b'), { text: 'old note', runId: null, scope: null, at: 1 })),
      inLife('', op('journal.append', at(7, 'b'), { entries: ['old entry'] })),
      inLife('', prefix(at(8, 'b'), 'old prefix')),
      inLife('', save(at(9, 'b'), 1, { summary: 'old summary' })),
      inLife('', op('session.clear', at(10, 'b'), {})),
      inLife('', op('checkpoint.create', at(11, 'b'), { id: 'old-cp', label: null, at: 1, snapshot: snapshotOf([]) })),
    ];
    const renewed = [del(at(3), ''), inLife(at(3), create(at(4))), inLife(at(3), append(at(12), 'kept'))];
    const { expected } = await converge([[inLife('', create(at(1))), ...old], renewed]);
    expect(expected).toMatchObject({ messages: ['kept:complete:kept'], notes: [], journal: [], memory: {}, prefix: '', checkpoints: [] });
    expect(expected?.state).toMatchObject({ version: 0, summary: null });
    await converge([[inLife('', create(at(1)))], renewed, old]);
  });

  it('old-life ops replayed after the new life has data change nothing', async () => {
    const oldLife = [inLife('', create(at(1))), inLife('', append(at(2), 'old')), inLife('', memorySet(at(2, 'b'), 'k', 1))];
    const newLife = [del(at(3), ''), inLife(at(3), create(at(4))), inLife(at(3), append(at(5), 'new')), inLife(at(3), memorySet(at(6), 'k', 2))];
    const { expected, late } = await converge([[...oldLife, ...newLife], oldLife, [newLife[0]!]]);
    expect(expected?.messages).toEqual(['new:complete:new']);
    expect(expected?.memory).toEqual({ k: 2 });
    expect(late.applied[1]).toEqual([]);
    expect(late.applied[2]).toEqual([]);
  });

  it('an op of a newer life ends the life a replica holds before that life\'s delete arrives', async () => {
    // The create of the new life comes first: it proves the delete it began after.
    const { expected, late } = await converge([
      [inLife('', create(at(1))), inLife('', append(at(2), 'old'))],
      [inLife(at(3), create(at(4))), inLife(at(3), append(at(5), 'new'))],
      [del(at(3), '')],
    ]);
    expect(expected?.messages).toEqual(['new:complete:new']);
    expect(late.applied[2]).toEqual([]);
  });

  it('a delete ordered before the tombstone changes nothing; one after it ends the life it finds, whichever life it names', async () => {
    const live = [inLife('', create(at(1))), del(at(5), ''), inLife(at(5), create(at(6))), inLife(at(5), append(at(7), 'alive'))];
    const { late } = await converge([live, [del(at(4, 'b'), '')]]);
    expect(late.applied[1]).toEqual([]);
    // Device b, still in the first life, deleted it at 8: after the tombstone, so the life created at 6 ends too.
    const { expected } = await converge([live, [del(at(8, 'b'), '')]]);
    expect(expected).toBeNull();
  });

  it('a create that names no life keeps the older rules beside ones that do', async () => {
    // Ops written before lives were named: a create after the tombstone starts a life, an op before the create is dropped.
    const { expected } = await converge([[inLife('', create(at(1))), del(at(3), '')], [create(at(4)), append(at(5), 'legacy')]]);
    expect(expected?.messages).toEqual(['legacy:complete:legacy']);
  });
});
