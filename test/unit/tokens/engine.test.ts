import * as fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { WINDOW_CHARS, createEngine as createEngineWith, createEngineHost } from '../../../src/tokens/engine.js';
import { IN_THREAD_ENCODINGS } from '../../../src/tokens/in-thread-encodings.js';
import { exactCounterOf } from '../../../src/tokens/bpe.js';
import { SAMPLES } from './samples.js';
import { fcParams, TEST_SEED } from '../seed.js';

const plain = { disallowedSpecial: new Set<string>() };
const createEngine = (loaders = IN_THREAD_ENCODINGS) => createEngineWith(loaders);
const reference = { o200k_base: o200k.countTokens, cl100k_base: cl100k.countTokens } as const;
const seed = TEST_SEED;

/** Text pieces of the kinds that stress a tokenizer: long runs, base64, code, CJK, emoji, whitespace. */
const piece = fc.oneof(
  fc.constantFrom(...Object.values(SAMPLES)),
  fc.record({ char: fc.constantFrom('a', '=', ' ', '\n', '-', 'A', '0', '字', '🙂', '\t', '/'), n: fc.integer({ min: 1, max: 3000 }) }).map(({ char, n }) => char.repeat(n)),
  fc.uint8Array({ minLength: 1, maxLength: 3000 }).map((bytes) => btoa(String.fromCharCode(...bytes))),
  fc.string({ unit: 'grapheme', maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 200 }),
  // Long single pre-tokens with varied merges (letters; symbols), which take the heap merge path.
  fc.string({ unit: fc.constantFrom('a', 'b', 'e', 'n', 't', 'é'), minLength: 256, maxLength: 2500 }),
  fc.string({ unit: fc.constantFrom('=', '-', '*', '#', '.', '_'), minLength: 256, maxLength: 2500 }),
);
/** Repeated pieces without long runs, so texts span several windows and gpt-tokenizer still counts them whole quickly. */
const repeated = fc
  .tuple(
    fc.oneof(
      fc.constantFrom(...Object.values(SAMPLES)),
      fc.uint8Array({ minLength: 1, maxLength: 3000 }).map((bytes) => btoa(String.fromCharCode(...bytes))),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200 }),
    ),
    fc.integer({ min: 1, max: 60 }),
  )
  .map(([p, n]) => p.repeat(n));
const text = fc.array(fc.oneof(piece, repeated), { maxLength: 10 }).map((pieces) => pieces.join(''));

describe('counting engine', () => {
  for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
    it(`equals gpt-tokenizer's own counts for ${encoding} on the sample set`, async () => {
      const engine = createEngine();
      const texts = Object.values(SAMPLES);
      const counts = await engine.countTexts(encoding, texts);
      expect(counts).toEqual(texts.map((t) => reference[encoding](t, plain)));
      expect(counts?.[Object.keys(SAMPLES).indexOf('empty')]).toBe(0);
    });

    it(`uses the exact fast path of this gpt-tokenizer version for ${encoding}`, async () => {
      const module = encoding === 'o200k_base' ? await import('gpt-tokenizer/encoding/o200k_base') : await import('gpt-tokenizer/encoding/cl100k_base');
      expect(exactCounterOf(module.default)).not.toBeNull();
    });

    it(`counts random texts (long runs, base64, code, CJK) exactly as gpt-tokenizer counts them whole, in windows too (${encoding}, seed ${seed})`, async () => {
      console.log(`[engine exactness ${encoding}] seed ${seed} (replay with TABULA_SEED=${seed})`);
      const engine = createEngine();
      await fc.assert(
        fc.asyncProperty(text, async (t) => {
          const expected = reference[encoding](t, plain);
          expect(await engine.countTexts(encoding, [t])).toEqual([expected]);
          expect(await engine.countLarge(encoding, 'r', t)).toBe(expected);
        }),
        fcParams(60),
      );
    }, 120_000);
  }

  it('counts a long unbroken run exactly without gpt-tokenizer’s quadratic merge (issue 10 item 9)', async () => {
    // 70 KB of `a` took 9 s in gpt-tokenizer; a run 4× as long is counted here in well under the test timeout.
    const engine = createEngine();
    const run = 'a'.repeat(280_000);
    const [tokens] = (await engine.countTexts('o200k_base', [run])) ?? [];
    // The exact count of the run is checked against gpt-tokenizer on a size it handles in reasonable time.
    const small = 'a'.repeat(6_000);
    expect(await engine.countTexts('o200k_base', [small])).toEqual([o200k.countTokens(small, plain)]);
    expect(tokens).toBeGreaterThan(run.length / 16);
    expect(tokens).toBeLessThan(run.length / 4);
  }, 60_000);

  it('counts special-token strings in user text instead of throwing', async () => {
    const engine = createEngine();
    const [n] = (await engine.countTexts('o200k_base', [SAMPLES.special!])) ?? [];
    expect(n).toBeGreaterThan(10);
    expect(() => o200k.countTokens(SAMPLES.special!)).toThrow(/Disallowed special token/);
  });

  it('counts large text in windows with progress, exactly', async () => {
    const paragraph = `${SAMPLES.english}\n${SAMPLES.code}\n${SAMPLES.chinese}\n`;
    const large = paragraph.repeat(3000); // ~570 KB
    const engine = createEngine();
    const progress: number[] = [];
    const total = await engine.countLarge('o200k_base', 'r1', large, (done) => progress.push(done));
    expect(total).toBe(o200k.countTokens(large, plain));
    expect(progress.at(-1)).toBe(large.length);
    expect(progress.length).toBeGreaterThanOrEqual(Math.floor(large.length / WINDOW_CHARS));
    expect([...progress].sort((a, b) => a - b)).toEqual(progress);
  });

  it('cancel() stops a large count between windows', async () => {
    const engine = createEngine();
    const large = `${SAMPLES.english}\n`.repeat(20_000);
    let calls = 0;
    const running = engine.countLarge('o200k_base', 'r2', large, () => {
      calls += 1;
      if (calls === 2) engine.cancel('r2');
    });
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    expect(calls).toBe(2);
  });

  it('a cancel on one connection never stops another connection’s request with the same id (issue 10 item 10)', async () => {
    const host = createEngineHost(IN_THREAD_ENCODINGS);
    const [tabA, tabB] = [host.connect(), host.connect()];
    const large = `${SAMPLES.code}\n`.repeat(8_000);
    let cancelledOnce = false;
    const counting = tabB.countLarge('o200k_base', 'c1', large, () => {
      // Tab A cancels its own request "c1" while tab B's "c1" is half-way.
      if (!cancelledOnce) tabA.cancel('c1');
      cancelledOnce = true;
    });
    await expect(counting).resolves.toBe(o200k.countTokens(large, plain));
  });

  it('with a time budget, gives up between windows and resolves null (the calling thread’s guard)', async () => {
    const engine = createEngine();
    const large = `${SAMPLES.english}\n`.repeat(5_000);
    // A budget of 0 is spent after the first window, whatever the machine's speed.
    expect(await engine.countTexts('o200k_base', [large], 0)).toBeNull();
    expect(await engine.countLarge('o200k_base', 'r3', large, undefined, 0)).toBeNull();
    // A text of one window finishes before the first check.
    expect(await engine.countTexts('o200k_base', ['short'], 0)).toEqual([1]);
  });

  it('a worker holding one encoding refuses another with a clear error', async () => {
    const engine = createEngine({ o200k_base: () => import('gpt-tokenizer/encoding/o200k_base') });
    await expect(engine.load('cl100k_base')).rejects.toThrow(/does not hold the encoding cl100k_base/);
  });

  it('a cancelled request rejects with an AbortError naming it, and its id is free again afterwards', async () => {
    const engine = createEngine();
    const large = `${SAMPLES.english}\n`.repeat(20_000);
    const running = engine.countLarge('o200k_base', 'r4', large, () => engine.cancel('r4'));
    await expect(running).rejects.toThrow(expect.objectContaining({ name: 'AbortError', message: 'Counting request r4 was cancelled.' }) as Error);
    expect(await engine.countLarge('o200k_base', 'r4', SAMPLES.english!)).toBe(o200k.countTokens(SAMPLES.english!, plain));
  });

  it('a cancel that arrives after its request finished, or for no request, stops nothing later', async () => {
    const engine = createEngine();
    const large = `${SAMPLES.english}\n`.repeat(2_000);
    const expected = o200k.countTokens(large, plain);
    expect(await engine.countLarge('o200k_base', 'r5', large)).toBe(expected);
    // The tab's cancel crossed the answer; another cancel names an id never used.
    engine.cancel('r5');
    engine.cancel('r6');
    expect(await engine.countLarge('o200k_base', 'r5', large)).toBe(expected);
    expect(await engine.countLarge('o200k_base', 'r6', large)).toBe(expected);
  });

  it('a cancel while the encoding is still loading stops the request before its first window', async () => {
    const engine = createEngine();
    let windows = 0;
    const running = engine.countLarge('o200k_base', 'r7', `${SAMPLES.english}\n`.repeat(2_000), () => (windows += 1));
    engine.cancel('r7');
    await expect(running).rejects.toMatchObject({ name: 'AbortError' });
    expect(windows).toBe(0);
  });

  it('loads each encoding once per host, however many connections and calls ask for it', async () => {
    let loads = 0;
    const host = createEngineHost({
      o200k_base: () => {
        loads += 1;
        return import('gpt-tokenizer/encoding/o200k_base');
      },
    });
    const [a, b] = [host.connect(), host.connect()];
    await Promise.all([a.load('o200k_base'), b.load('o200k_base'), a.countTexts('o200k_base', ['x']), b.countLarge('o200k_base', 'r', 'y')]);
    expect(loads).toBe(1);
  });

  it('a failed load of an encoding is not kept: the next request loads it again', async () => {
    let loads = 0;
    const host = createEngineHost({
      o200k_base: () => {
        loads += 1;
        return loads === 1 ? Promise.reject(new Error('chunk fetch failed')) : import('gpt-tokenizer/encoding/o200k_base');
      },
    });
    const engine = host.connect();
    await expect(engine.countTexts('o200k_base', ['hello world'])).rejects.toThrow('chunk fetch failed');
    expect(await engine.countTexts('o200k_base', ['hello world'])).toEqual([2]);
    await engine.load('o200k_base');
    expect(loads).toBe(2);
  });

  it('an encoding module without the internals the fast path reads is counted whole by its own countTokens, special tokens as text', async () => {
    const engine = createEngine({ o200k_base: () => Promise.resolve({ countTokens: o200k.countTokens }) });
    const texts = Object.values(SAMPLES);
    expect(await engine.countTexts('o200k_base', texts)).toEqual(texts.map((t) => o200k.countTokens(t, plain)));
    const large = `${SAMPLES.code}\n`.repeat(2_000);
    const progress: number[] = [];
    // One window, the whole text: there is no safe cut point without the internals, so the budget is never checked.
    expect(await engine.countLarge('o200k_base', 'r', large, (done) => progress.push(done), 0)).toBe(o200k.countTokens(large, plain));
    expect(progress).toEqual([large.length]);
    expect(await engine.countTexts('o200k_base', [large], 0)).toEqual([o200k.countTokens(large, plain)]);
  });
});

describe('counting engine: the time budget against a clock that does not move', () => {
  // performance.now() frozen: elapsed time is exactly 0, so a budget of 0 is spent exactly (>=, not >).
  afterEach(() => vi.restoreAllMocks());

  it('a budget of 0 stops after the first window even when no time has passed; a text of one window is counted', async () => {
    vi.spyOn(performance, 'now').mockReturnValue(1_000);
    const engine = createEngine();
    const large = `${SAMPLES.english}\n`.repeat(5_000);
    expect(await engine.countTexts('o200k_base', [large], 0)).toBeNull();
    expect(await engine.countLarge('o200k_base', 'r', large, undefined, 0)).toBeNull();
    expect(await engine.countTexts('o200k_base', [SAMPLES.english!], 0)).toEqual([o200k.countTokens(SAMPLES.english!, plain)]);
    expect(await engine.countLarge('o200k_base', 'r', SAMPLES.english!, undefined, 0)).toBe(o200k.countTokens(SAMPLES.english!, plain));
    // Without a budget the clock is never read as a limit: the whole text is counted.
    expect(await engine.countLarge('o200k_base', 'r', large)).toBe(o200k.countTokens(large, plain));
  });
});
