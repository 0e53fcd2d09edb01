import { describe, expect, it } from 'vitest';
import { PrefixContext, WorkingContext, fromFrozenData, isTabulaError, toFrozenData } from '../../../src/core/index.js';

describe('frozen context as data', () => {
  const source = () => {
    const ctx = new WorkingContext({
      prefix: new PrefixContext({ systemPrompt: 'p', grounding: [{ role: 'user', content: 'doc' }], schemaBlock: 'json' }),
      messages: [
        { role: 'user', content: 'q', name: 'ann' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      ],
      scratchpad: { zeta: { n: [1] }, alpha: 'a' },
    });
    ctx.journal.record({ by: 'agent', did: 'x' });
    return ctx.freeze();
  };

  it('survives structuredClone and JSON, and rebuilds an equal, frozen snapshot', () => {
    const frozen = source();
    for (const carried of [structuredClone(toFrozenData(frozen)), JSON.parse(JSON.stringify(toFrozenData(frozen))) as unknown]) {
      const rebuilt = fromFrozenData(carried);
      expect(rebuilt.equals(frozen)).toBe(true);
      expect(rebuilt.key()).toBe(frozen.key());
      expect(Object.isFrozen(rebuilt.messages[0])).toBe(true);
      expect(Object.isFrozen((rebuilt.scratchpad[1]![1] as { n: number[] }).n)).toBe(true);
      expect(WorkingContext.fromFrozen(rebuilt).messages).toHaveLength(2);
    }
  });

  it('refuses malformed data, naming the part', () => {
    const data = toFrozenData(source());
    const bad = [
      [null, /must be an object/],
      [{ ...data, messages: 'x' }, /needs prefix/],
      [{ ...data, messages: [{ role: 'user' }] }, /frozen context messages\[0\].*content/],
      [{ ...data, scratchpad: [['k']] }, /scratchpad\[0\] must be a \[key, value\] pair/],
      [{ ...data, scratchpad: [['k', Number.NaN]] }, /scratchpad key "k"/],
    ] as const;
    for (const [value, message] of bad) {
      try {
        fromFrozenData(value);
        expect.unreachable();
      } catch (error) {
        expect(isTabulaError(error, 'schema/invalid') || isTabulaError(error, 'argument/invalid')).toBe(true);
        expect((error as Error).message).toMatch(message);
      }
    }
  });
});

describe('frozen context data: each malformed part is refused as schema/invalid', () => {
  const data = () => toFrozenData(new WorkingContext({ scratchpad: { k: 1 } }).freeze());

  it.each([
    ['a string', () => 'frozen', 'Frozen context data must be an object with prefix, messages, scratchpad and journalEntries.'],
    ['a string prefix', () => ({ ...data(), prefix: 'p' }), 'Frozen context data needs prefix (object), messages, scratchpad and journalEntries (arrays).'],
    ['a null prefix', () => ({ ...data(), prefix: null }), 'Frozen context data needs prefix (object), messages, scratchpad and journalEntries (arrays).'],
    ['journalEntries that are not an array', () => ({ ...data(), journalEntries: {} }), 'Frozen context data needs prefix (object), messages, scratchpad and journalEntries (arrays).'],
    ['a scratchpad triple', () => ({ ...data(), scratchpad: [['k', 1, 2]] }), 'Frozen context scratchpad[0] must be a [key, value] pair.'],
    ['a scratchpad pair with a number key', () => ({ ...data(), scratchpad: [[1, 1]] }), 'Frozen context scratchpad[0] must be a [key, value] pair.'],
  ])('%s', (_label, value, message) => {
    try {
      fromFrozenData(value());
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toBe(message);
    }
  });

  it('refuses a scratchpad key given twice: a snapshot holds one value per key', () => {
    try {
      fromFrozenData({ ...data(), scratchpad: [['k', 1], ['j', 2], ['k', 3]] });
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toBe('Frozen context scratchpad[2] repeats the key "k"; a snapshot holds one value per key.');
    }
  });

  it('refuses a "__proto__" scratchpad key, naming its position', () => {
    expect(() => fromFrozenData({ ...data(), scratchpad: [['ok', 1], ['__proto__', 1]] })).toThrow(/^frozen context scratchpad\[1\]: the key "__proto__" is refused/);
  });
});
