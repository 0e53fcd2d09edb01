import fc from 'fast-check';
import { fcParams } from '../seed.js';
import { describe, expect, it } from 'vitest';
import { MutationJournal } from '../../../src/core/index.js';

describe('MutationJournal', () => {
  it('treats seed entries as committed', () => {
    const journal = new MutationJournal(['a', 'b']);
    expect(journal.watermark).toBe(2);
    expect(journal.diff()).toEqual([]);
    journal.record('c');
    expect(journal.diff()).toEqual(['c']);
    expect(journal.view()).toEqual(['a', 'b', 'c']);
  });

  it('streams diffs past the watermark', () => {
    const journal = new MutationJournal<{ by: string; op: string }>();
    journal.record({ by: 'child', op: 'x' });
    journal.apply([{ by: 'child', op: 'y' }]);
    expect(journal.diff()).toHaveLength(2);
    journal.markCommitted();
    expect(journal.diff()).toEqual([]);
    journal.record({ by: 'child', op: 'z' });
    expect(journal.diff()).toEqual([{ by: 'child', op: 'z' }]);
    expect(journal.length).toBe(3);
    expect(journal.watermark).toBe(2);
  });

  it('never rewrites: entries keep their identity and attribution', () => {
    const entry = { by: 'agent-1' };
    const journal = new MutationJournal<object>();
    journal.record(entry);
    expect(journal.view()[0]).toBe(entry);
  });

  it('hands out read-only views', () => {
    const journal = new MutationJournal([1]);
    expect(Object.isFrozen(journal.view())).toBe(true);
    expect(Object.isFrozen(journal.diff())).toBe(true);
    const before = journal.view();
    journal.record(2);
    expect(before).toEqual([1]);
  });

  it('appends nothing when a batch fails part-way', () => {
    const journal = new MutationJournal<number>();
    function* failing(): Generator<number> {
      yield 1;
      throw new Error('source broke');
    }
    expect(() => journal.apply(failing())).toThrow('source broke');
    expect(journal.length).toBe(0);
  });

  it('clone() keeps entries and watermark but shares nothing', () => {
    const journal = new MutationJournal([1]);
    journal.record(2);
    const copy = journal.clone();
    expect(copy.view()).toEqual([1, 2]);
    expect(copy.watermark).toBe(1);
    copy.record(3);
    expect(journal.length).toBe(2);
  });

  it('diff() is always the suffix past the watermark (property)', () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constant('record' as const), value: fc.integer() }),
      fc.record({ kind: fc.constant('apply' as const), values: fc.array(fc.integer(), { maxLength: 4 }) }),
      fc.record({ kind: fc.constant('commit' as const) }),
    );
    fc.assert(
      fc.property(fc.array(fc.integer(), { maxLength: 5 }), fc.array(action, { maxLength: 30 }), (seed, actions) => {
        const journal = new MutationJournal(seed);
        const model = [...seed];
        let watermark = seed.length;
        for (const step of actions) {
          if (step.kind === 'record') {
            journal.record(step.value);
            model.push(step.value);
          } else if (step.kind === 'apply') {
            journal.apply(step.values);
            model.push(...step.values);
          } else {
            journal.markCommitted();
            watermark = model.length;
          }
          expect(journal.view()).toEqual(model);
          expect(journal.diff()).toEqual(model.slice(watermark));
        }
      }),
      fcParams(300),
    );
  });
});

describe('MutationJournal arguments and no-ops', () => {
  it('refuses a non-iterable seed or batch, naming the call', () => {
    expect(() => new MutationJournal(5 as unknown as [])).toThrow('new MutationJournal(initial) takes an array (or another iterable), got 5.');
    expect(() => new MutationJournal().apply('ab')).toThrow('journal.apply(entries) takes an array (or another iterable), got "ab".');
  });

  it('an empty batch keeps the same view', () => {
    const journal = new MutationJournal(['a']);
    const view = journal.view();
    journal.apply([]);
    expect(journal.view()).toBe(view);
    journal.apply(['b']);
    expect(journal.view()).toEqual(['a', 'b']);
  });
});
