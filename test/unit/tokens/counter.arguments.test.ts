/**
 * Every TokenCounter method (and createTokenCounter itself), called with
 * every kind of wrong argument (the shared list of test/unit/wrong-values.ts:
 * null, undefined, number, NaN, string, array, Map, Date, function, object,
 * cyclic, deeply nested), rejects with a TabulaError with a code, and
 * nothing changes: the counter still counts exactly and its cache holds
 * what it held. Seeded with fast-check; TABULA_SEED=n replays a seed.
 */
import * as fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { createTokenCounter, isTabulaError, messageTokenText, type Message, type TokenCounterOptions, type WorkerTokenCounter } from '../../../src/index.js';
import { messageFixedTokens } from '../../../src/core/tokens.js';
import { fcParams, TEST_SEED } from '../seed.js';
import { wrongValuesExcept, type WrongKind } from '../wrong-values.js';

const seed = TEST_SEED;

type Wrong = { name: string; make: () => unknown };
const except = (...kinds: WrongKind[]): Wrong[] => wrongValuesExcept(...kinds).map((wrong) => ({ name: wrong.kind, make: wrong.make }));
/**
 * Wrong as a message list: not an array of messages (an array holding a wrong message included). In a
 * list, `cyclic` is a message: its role and content are valid, and the counter reads only the fields it
 * counts, so the cycle under an extra field is never reached.
 */
const wrongLists: Wrong[] = [
  ...except('array'),
  ...except('cyclic').map((w) => ({ name: `[${w.name}]`, make: () => [w.make()] })),
  { name: '[{ role, content: 5 }]', make: () => [{ role: 'user', content: 5 }] },
];
/**
 * Wrong as countText's options: not an object of { onProgress?: function, signal?: AbortSignal }.
 * Plain objects without those keys (`object`, the cyclic ones, the deep one) are options that set
 * nothing, so they are not wrong here.
 */
const wrongOptions: Wrong[] = [
  ...except('undefined', 'object', 'cyclic', 'cyclic content', 'deep object'),
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

/** The TabulaError `run` throws or rejects with (or a failure saying it did not). */
async function refusal(run: () => unknown): Promise<{ code: string; message: string }> {
  try {
    await run();
  } catch (error) {
    if (isTabulaError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a TabulaError, but the call succeeded');
}

describe('TokenCounter: each refusal names the method, the argument and what was given', () => {
  const counter = createTokenCounter({ worker: 'none' });
  const notAMessage = 'is not a message (a { role, content } object with string or part-array content), got';
  const cases: [string, () => unknown, string][] = [
    ['count(null)', () => counter.count(null as never), 'counter.count() takes an array of messages, got null.'],
    ['countEach(Map)', () => counter.countEach(new Map() as never), 'counter.countEach() takes an array of messages, got an object (Map).'],
    ['measureEach(42)', () => counter.measureEach(42 as never), 'counter.measureEach() takes an array of messages, got number 42.'],
    ['countEach([ok, "hi"])', () => counter.countEach([{ role: 'user', content: 'ok' }, 'hi' as never]), `counter.countEach(): messages[1] ${notAMessage} string "hi".`],
    ['count([[1]])', () => counter.count([[1] as never]), `counter.count(): messages[0] ${notAMessage} an array.`],
    ['count([Date])', () => counter.count([new Date(0) as never]), `counter.count(): messages[0] ${notAMessage} an object (Date).`],
    ['countText(null)', () => counter.countText(null as never), 'counter.countText() takes a string, got null.'],
    ['measureText(true)', () => counter.measureText(true as never), 'counter.measureText() takes a string, got boolean true.'],
    ['countText(long text as options)', () => counter.countText('x', 'y'.repeat(50) as never), `counter.countText() options must be an object { onProgress?, signal? }, got string "${'y'.repeat(40)}…".`],
    // 40 characters are shown whole; from 41 on, the first 40 and an ellipsis.
    ['countText(40 characters as options)', () => counter.countText('x', 'z'.repeat(40) as never), `counter.countText() options must be an object { onProgress?, signal? }, got string "${'z'.repeat(40)}".`],
    ['countText(41 characters as options)', () => counter.countText('x', 'z'.repeat(41) as never), `counter.countText() options must be an object { onProgress?, signal? }, got string "${'z'.repeat(40)}…".`],
    ['measureText(x, 5)', () => counter.measureText('x', 5 as never), 'counter.measureText() options must be an object { onProgress?, signal? }, got number 5.'],
    ['countText(x, { onProgress: "f" })', () => counter.countText('x', { onProgress: 'f' as never }), 'counter.countText({ onProgress }) must be a function, got string "f".'],
    ['countText(x, { signal: {} })', () => counter.countText('x', { signal: {} as never }), 'counter.countText({ signal }) must be an AbortSignal, got an object (Object).'],
    ['createTokenCounter(null)', () => createTokenCounter(null as never), 'createTokenCounter() takes an options object, got null.'],
    ['createTokenCounter([])', () => createTokenCounter([] as never), 'createTokenCounter() takes an options object, got an array.'],
    ['encoding', () => createTokenCounter({ encoding: 'gpt9' as never }), 'createTokenCounter: encoding must be one of o200k_base, cl100k_base, got "gpt9".'],
    ['worker', () => createTokenCounter({ worker: 'magic' as never }), `createTokenCounter: worker must be 'shared', 'dedicated' or 'none', got "magic".`],
    ['requestTimeoutMs', () => createTokenCounter({ requestTimeoutMs: -1 }), 'createTokenCounter: requestTimeoutMs must be a number ≥ 0, got number -1.'],
    ['startTimeoutMs', () => createTokenCounter({ startTimeoutMs: '5' as never }), 'createTokenCounter: startTimeoutMs must be a number ≥ 0, got string "5".'],
    ['cacheSize', () => createTokenCounter({ cacheSize: Number.NaN }), 'createTokenCounter: cacheSize must be a number ≥ 0, got number NaN.'],
    ['workerUrl', () => createTokenCounter({ workerUrl: 5 as never }), 'createTokenCounter: workerUrl must be a string or a URL, got number 5.'],
  ];
  for (const [name, run, message] of cases) {
    it(name, async () => {
      expect(await refusal(run)).toEqual({ code: 'argument/invalid', message });
    });
  }

  it('where AbortSignal does not exist, a signal option is refused as not an AbortSignal (not a TypeError)', async () => {
    const own = createTokenCounter({ worker: 'none' });
    vi.stubGlobal('AbortSignal', undefined);
    try {
      expect(await refusal(() => own.countText('x', { signal: {} as never }))).toEqual({
        code: 'argument/invalid',
        message: 'counter.countText({ signal }) must be an AbortSignal, got an object (Object).',
      });
      expect(await own.countText('x', {})).toBe(1);
    } finally {
      vi.unstubAllGlobals();
      own.close();
    }
  });

  it('a signal already aborted rejects tokens/aborted before anything is counted, with its reason as cause', async () => {
    const controller = new AbortController();
    controller.abort('not now');
    await expect(counter.countText('x', { signal: controller.signal })).rejects.toThrow(
      expect.objectContaining({ code: 'tokens/aborted', message: 'Counting was aborted before it started.', cause: 'not now' }) as Error,
    );
    expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 0 });
  });
});

describe('TokenCounter: what a message may be, field by field', () => {
  const call = { id: 'c1', type: 'function', function: { name: 'search', arguments: '{"q":"x"}' } };
  const accepted: [string, Record<string, unknown>][] = [
    ['string content', { role: 'user', content: 'hello' }],
    ['null content with tool calls', { role: 'assistant', content: null, tool_calls: [call, { ...call, id: 'c2' }] }],
    ['part-array content', { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] }],
    ['a name', { role: 'user', content: 'hi', name: 'ann' }],
    ['a tool_call_id', { role: 'tool', content: '18°C', tool_call_id: 'c1' }],
    ['a null-prototype object', Object.assign(Object.create(null) as Record<string, unknown>, { role: 'user', content: 'bare' })],
  ];
  const refused: [string, unknown][] = [
    ['role not a string', { role: 5, content: 'x' }],
    ['no role', { content: 'x' }],
    ['content a number', { role: 'user', content: 5 }],
    ['content undefined', { role: 'user' }],
    ['a part that is null', { role: 'user', content: [null] }],
    ['a later part without a type', { role: 'user', content: [{ type: 'text', text: 'a' }, { text: 'b' }] }],
    ['a part whose type is a number', { role: 'user', content: [{ type: 5 }] }],
    ['a part that is a Map', { role: 'user', content: [new Map([['type', 'text']])] }],
    ['name a number', { role: 'user', content: 'x', name: 5 }],
    ['tool_call_id a number', { role: 'tool', content: 'x', tool_call_id: 5 }],
    ['tool_calls not an array', { role: 'assistant', content: null, tool_calls: call }],
    ['a tool call that is null', { role: 'assistant', content: null, tool_calls: [null] }],
    ['a later tool call without a function', { role: 'assistant', content: null, tool_calls: [call, { id: 'c2', type: 'function' }] }],
    ['a function name that is a number', { role: 'assistant', content: null, tool_calls: [{ ...call, function: { name: 5, arguments: '{}' } }] }],
    ['function arguments that are an object', { role: 'assistant', content: null, tool_calls: [{ ...call, function: { name: 'f', arguments: {} } }] }],
  ];

  it('accepts every shape a message may have, and counts it as its token text plus its fixed tokens', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    for (const [name, message] of accepted) {
      const m = message as unknown as Message;
      const expected = o200k.countTokens(messageTokenText(m), { disallowedSpecial: new Set() }) + messageFixedTokens(m);
      expect(await counter.countEach([m]), name).toEqual([expected]);
    }
    counter.close();
  });

  for (const [name, message] of refused) {
    it(`refuses a message with ${name}, naming its index`, async () => {
      const counter = createTokenCounter({ worker: 'none' });
      const { code, message: text } = await refusal(() => counter.measureEach([{ role: 'user', content: 'fine' }, message as Message]));
      expect(code).toBe('argument/invalid');
      expect(text).toMatch(/^counter\.measureEach\(\): messages\[1\] is not a message/);
      counter.close();
    });
  }

  it('createTokenCounter takes a null-prototype options object', async () => {
    const options = Object.assign(Object.create(null) as TokenCounterOptions, { worker: 'none', encoding: 'cl100k_base' });
    const counter = createTokenCounter(options);
    expect(counter.name).toBe('cl100k_base');
    expect(await counter.ready).toBe('in-thread');
    counter.close();
  });
});
