/**
 * One rule for the key `__proto__` on every map-like API (issue 10 #6): it
 * is refused with schema/invalid naming the key, and nothing is stored.
 * The rule lives in src/core/json.ts (findKeyProblem); this test checks
 * that every API follows it.
 */
import { describe, expect, it } from 'vitest';
import { WorkingContext, fromFrozenData, isTabulaError, type JsonValue } from '../../../src/index.js';
import { freshTabula } from './helpers.js';

const hostile = (): Record<string, JsonValue> => JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, JsonValue>;

function expectProtoRefused(call: () => unknown): Promise<void> {
  return Promise.resolve()
    .then(call)
    .then(
      () => expect.unreachable('__proto__ was accepted'),
      (error: unknown) => {
        expect(isTabulaError(error), String(error)).toBe(true);
        expect(error).toMatchObject({ code: expect.stringMatching(/^(schema\/invalid|memory\/bad-key|memory\/bad-value)$/) as string });
        expect((error as Error).message).toContain('__proto__');
      },
    );
}

describe('the __proto__ key is refused everywhere', () => {
  it('in session APIs: save(), memory, journal, blackboard, a run’s ctx.set; nothing is stored', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const before = await session.export();

    await expectProtoRefused(() => session.save({ context: hostile() }));
    await expectProtoRefused(() => session.save({ tasks: { nested: hostile() } }));
    await expectProtoRefused(() => session.save(hostile()));
    await expectProtoRefused(() => session.memory().set('__proto__', 1));
    await expectProtoRefused(() => session.memory().set('k', hostile()));
    await expectProtoRefused(() => session.journal.record(hostile()));
    await expectProtoRefused(() => session.blackboard.set('__proto__', 1));
    await expectProtoRefused(() => session.blackboard.set('k', hostile()));
    await expectProtoRefused(() => session.blackboard.update(hostile()));
    await expect(
      session.run(async (ctx) => {
        await expectProtoRefused(() => ctx.set('__proto__', 1));
        await expectProtoRefused(() => ctx.set('k', hostile()));
        await expectProtoRefused(() => ctx.memory.set('__proto__', 1));
      }),
    ).resolves.toBeUndefined();
    const after = await session.export();
    expect(after.state).toEqual(before.state);
    expect(after.memory).toEqual([]);
    expect(after.journal.entries).toEqual([]);
    expect(after.blackboard).toEqual({});
    await tabula.close();
  });

  it('in the core: WorkingContext scratchpad and frozen data', async () => {
    await expectProtoRefused(() => new WorkingContext({ scratchpad: hostile() }));
    const ctx = new WorkingContext();
    await expectProtoRefused(() => ctx.set('__proto__', 1));
    await expectProtoRefused(() => ctx.update(hostile()));
    await expectProtoRefused(() => ctx.set('k', hostile()));
    expect(ctx.freeze().scratchpad).toEqual([]);
    const data = { prefix: { systemPrompt: '', grounding: [], schemaBlock: null }, messages: [], scratchpad: [['__proto__', 1]], journalEntries: [] };
    await expectProtoRefused(() => fromFrozenData(data));
  });
});
