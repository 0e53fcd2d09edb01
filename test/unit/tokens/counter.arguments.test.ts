/**
 * Every TokenCounter method (and createTokenCounter itself), called with
 * every kind of wrong argument (null, undefined, number, string, array, Map,
 * cyclic, deeply nested), rejects with a TabulaError with a code, and
 * nothing changes: the counter still counts exactly and its cache holds
 * what it held. Seeded with fast-check; TABULA_SEED=n replays a seed.
 */
import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createTokenCounter, isTabulaError, type Message, type WorkerTokenCounter } from '../../../src/index.js';
import { fcParams, TEST_SEED } from '../seed.js';

const seed = TEST_SEED;

function cyclic(): Record<string, unknown> {
  const value: Record<string, unknown> = { role: 'user' };
  value.content = value;
  return value;
}

function deep(): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < 20_000; i++) value = [value];
  return value;
}

type Wrong = { name: string; make: () => unknown };
const anything: Wrong[] = [
  { name: 'null', make: () => null },
  { name: 'undefined', make: () => undefined },
  { name: 'number', make: () => 42 },
  { name: 'string', make: () => 'text' },
  { name: 'array of numbers', make: () => [1, 2] },
  { name: 'Map', make: () => new Map([['role', 'user']]) },
  { name: 'cyclic', make: cyclic },
  { name: 'deep', make: deep },
];
const except = (...names: string[]) => anything.filter((w) => !names.includes(w.name));
/** Wrong as a message list: not an array of messages (an array holding a wrong message included). */
const wrongLists: Wrong[] = [...except('array of numbers'), ...anything.map((w) => ({ name: `[${w.name}]`, make: () => [w.make()] })), { name: '[{ role, content: 5 }]', make: () => [{ role: 'user', content: 5 }] }];
/** Wrong as countText's options: not an object of { onProgress?: function, signal?: AbortSignal }. */
const wrongOptions: Wrong[] = [
  ...except('undefined', 'cyclic'),
  { name: '{ onProgress: 1 }', make: () => ({ onProgress: 1 }) },
  { name: '{ signal: {} }', make: () => ({ signal: {} }) },
];

type Call = { method: string; wrong: Wrong; run: (counter: WorkerTokenCounter, arg: unknown) => Promise<unknown> };
const calls: Call[] = [
  ...wrongLists.map((wrong) => ({ method: 'count', wrong, run: (c: WorkerTokenCounter, a: unknown) => c.count(a as Message[]) })),
  ...wrongLists.map((wrong) => ({ method: 'countEach', wrong, run: (c: WorkerTokenCounter, a: unknown) => c.countEach(a as Message[]) })),
  ...wrongLists.map((wrong) => ({ method: 'measureEach', wrong, run: (c: WorkerTokenCounter, a: unknown) => c.measureEach(a as Message[]) })),
  ...except('string').map((wrong) => ({ method: 'countText', wrong, run: (c: WorkerTokenCounter, a: unknown) => c.countText(a as string) })),
  ...except('string').map((wrong) => ({ method: 'measureText', wrong, run: (c: WorkerTokenCounter, a: unknown) => c.measureText(a as string) })),
  ...wrongOptions.map((wrong) => ({ method: 'countText', wrong: { ...wrong, name: `options ${wrong.name}` }, run: (c: WorkerTokenCounter, a: unknown) => c.countText('hello', a as never) })),
  ...wrongOptions.map((wrong) => ({ method: 'measureText', wrong: { ...wrong, name: `options ${wrong.name}` }, run: (c: WorkerTokenCounter, a: unknown) => c.measureText('hello', a as never) })),
];

describe('TokenCounter: wrong arguments (class-wide, seeded)', () => {
  it(`every method rejects every wrong argument with a TabulaError, and the counter is unchanged (seed ${seed})`, async () => {
    console.log(`[counter arguments] seed ${seed} (replay with TABULA_SEED=${seed})`);
    const counter = createTokenCounter({ worker: 'none' });
    const probe: Message = { role: 'user', content: 'the counter still counts' };
    const baseline = await counter.countEach([probe]);
    await fc.assert(
      // A random order of calls, so no call depends on the state an earlier one left.
      fc.asyncProperty(fc.shuffledSubarray(calls, { minLength: calls.length }), async (order) => {
        for (const call of order) {
          const before = counter.stats();
          let thrown: unknown = null;
          try {
            await call.run(counter, call.wrong.make());
          } catch (error) {
            thrown = error;
          }
          const what = `${call.method} with ${call.wrong.name}`;
          expect(isTabulaError(thrown), `${what} threw ${String(thrown)}`).toBe(true);
          expect((thrown as { code: string }).code, what).toBe('argument/invalid');
          expect(counter.stats(), `${what} changed the counter`).toEqual(before);
        }
      }),
      fcParams(5),
    );
    expect(await counter.countEach([probe])).toEqual(baseline);
    counter.close();
  }, 120_000);

  it('createTokenCounter refuses wrong options with argument/invalid', () => {
    const wrongCreate: unknown[] = [null, 42, 'o200k_base', [1], new Map(), { encoding: 5 }, { worker: null }, { requestTimeoutMs: -1 }, { requestTimeoutMs: 'x' }, { cacheSize: NaN }, { workerUrl: 5 }];
    for (const options of wrongCreate) {
      expect(() => createTokenCounter(options as never), JSON.stringify(options) ?? String(options)).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    }
  });

  it('counter.count(null) is a TabulaError, not a TypeError (issue 10 item 12)', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    await expect(counter.count(null as never)).rejects.toMatchObject({ name: 'TabulaError', code: 'argument/invalid' });
    counter.close();
  });
});
