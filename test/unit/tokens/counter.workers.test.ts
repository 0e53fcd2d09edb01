/**
 * The counter's worker paths in Node, over stand-in Worker / SharedWorker
 * globals (fake-workers.ts) that run the real serve() and engine over a
 * MessageChannel, or an engine that misbehaves on purpose: which script
 * starts for which encoding, the fallback order shared → dedicated →
 * in-thread and the reason it gives, the start and request budgets, the
 * restart of a stuck dedicated worker (never of a shared one), aborts, bad
 * replies, and what close() releases. The same paths run in real Chromium
 * in test/browser/tokens-in-chromium.test.ts.
 */
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createTokenCounter, type Message } from '../../../src/index.js';
import { estimateTextTokens } from '../../../src/core/tokens.js';
import { bundledScript, heldEngine, installFakeWorkers, type FakeWorkers, type Kind, type Script } from './fake-workers.js';
import { SAMPLES } from './samples.js';

const plain = { disallowedSpecial: new Set<string>() };
const reference = { o200k_base: o200k.countTokens, cl100k_base: cl100k.countTokens } as const;

let workers: FakeWorkers | null = null;
const install = (scriptFor?: (kind: Kind, url: string) => Script): FakeWorkers => (workers = installFakeWorkers(scriptFor));
afterEach(() => {
  vi.useRealTimers();
  workers?.uninstall();
  workers = null;
});

/** Fake setTimeout only: the budgets' timers; MessageChannel, setImmediate and performance stay real. */
const fakeTimers = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
/** One turn of the event loop (setImmediate is never faked here): every queued message and microtask runs. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
/** Waits, turn by turn, for `done` (an event the test cannot await directly). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await turn();
}

describe('which worker starts, for which encoding', () => {
  for (const kind of ['shared', 'dedicated'] as const) {
    for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
      it(`${kind} / ${encoding}: starts the bundled ${encoding} script on the first count, and counts as gpt-tokenizer does`, async () => {
        const fake = install();
        const counter = createTokenCounter({ worker: kind, encoding });
        // Nothing starts before the first count; mode says what will be tried first.
        expect(fake.spawned).toEqual([]);
        expect(counter.mode).toBe(kind);
        expect(await counter.ready).toBe(kind);
        expect(counter.mode).toBe(kind);
        expect(counter.fallbackReason).toBeNull();
        const file = encoding === 'o200k_base' ? 'o200k-worker.js' : 'cl100k-worker.js';
        expect(fake.spawned).toEqual([
          expect.objectContaining({ kind, url: expect.stringMatching(new RegExp(`/${file}$`)) as string, options: { type: 'module', name: `tabula-tokens-${encoding}-${kind}` } }),
        ]);
        for (const text of Object.values(SAMPLES)) expect(await counter.countText(text)).toBe(reference[encoding](text, plain));
        const message: Message = { role: 'user', content: SAMPLES.english! };
        expect(await counter.measureEach([message])).toEqual([{ tokens: expect.any(Number) as number, exact: true }]);
        counter.close();
      });
    }
  }

  for (const workerUrl of ['https://cdn.example/tokens.js', new URL('https://cdn.example/tokens.js')]) {
    it(`a workerUrl (${typeof workerUrl === 'string' ? 'string' : 'URL'}) is the script started, named for encoding and kind`, async () => {
      const fake = install((_kind, url) => (url === 'https://cdn.example/tokens.js' ? { serve: { cl100k_base: () => import('gpt-tokenizer/encoding/cl100k_base') } } : { fail: 'not this one' }));
      const counter = createTokenCounter({ encoding: 'cl100k_base', workerUrl });
      expect(await counter.ready).toBe('shared');
      expect(fake.spawned.map(({ kind, url, options }) => ({ kind, url, options }))).toEqual([
        { kind: 'shared', url: 'https://cdn.example/tokens.js', options: { type: 'module', name: 'tabula-tokens-cl100k_base-shared' } },
      ]);
      expect(await counter.countText(SAMPLES.code!)).toBe(cl100k.countTokens(SAMPLES.code!, plain));
      counter.close();
    });
  }

  it("a workerUrl serves worker: 'dedicated' too, as a dedicated Worker named for it", async () => {
    const fake = install((_kind, url) => (url === 'https://cdn.example/tokens.js' ? { serve: { o200k_base: () => import('gpt-tokenizer/encoding/o200k_base') } } : { fail: 'not this one' }));
    const counter = createTokenCounter({ worker: 'dedicated', workerUrl: 'https://cdn.example/tokens.js' });
    expect(await counter.ready).toBe('dedicated');
    expect(fake.spawned.map(({ kind, url, options }) => ({ kind, url, options }))).toEqual([
      { kind: 'dedicated', url: 'https://cdn.example/tokens.js', options: { type: 'module', name: 'tabula-tokens-o200k_base-dedicated' } },
    ]);
    expect(await counter.countText(SAMPLES.code!)).toBe(o200k.countTokens(SAMPLES.code!, plain));
    counter.close();
  });

  it("worker: 'none' counts in the calling thread and starts no worker, even where workers exist", async () => {
    const fake = install();
    const counter = createTokenCounter({ worker: 'none' });
    expect(counter.mode).toBe('in-thread');
    expect(await counter.ready).toBe('in-thread');
    expect(counter.fallbackReason).toBeNull();
    expect(await counter.countText('hello world')).toBe(2);
    expect(fake.spawned).toEqual([]);
    counter.close();
  });

  it('a counter opened on a shared worker another counter started connects to it (one script for every tab)', async () => {
    const fake = install();
    const [a, b] = [createTokenCounter(), createTokenCounter()];
    expect(await a.countText(SAMPLES.english!)).toBe(o200k.countTokens(SAMPLES.english!, plain));
    expect(await b.countText(SAMPLES.chinese!)).toBe(o200k.countTokens(SAMPLES.chinese!, plain));
    expect(fake.spawned.map((s) => s.kind)).toEqual(['shared', 'shared']);
    a.close();
    b.close();
  });
});

describe('the fallback order: shared, then dedicated, then the calling thread', () => {
  it('a shared worker whose script fails starts a dedicated one; the failed one is released', async () => {
    const fake = install((kind, url) => (kind === 'shared' ? { fail: 'blocked by CSP' } : bundledScript(url)));
    const counter = createTokenCounter();
    expect(await counter.ready).toBe('dedicated');
    expect(counter.mode).toBe('dedicated');
    expect(fake.spawned.map((s) => [s.kind, s.portClosed, s.terminated])).toEqual([
      ['shared', true, false],
      ['dedicated', false, false],
    ]);
    expect(await counter.countText(SAMPLES.code!)).toBe(o200k.countTokens(SAMPLES.code!, plain));
    counter.close();
  });

  it('when both fail, counts in the calling thread and says why, per worker, with the browser message or its own', async () => {
    const fake = install((kind) => ({ fail: kind === 'shared' ? '' : 'Failed to fetch the worker script' }));
    const counter = createTokenCounter();
    expect(await counter.ready).toBe('in-thread');
    expect(counter.mode).toBe('in-thread');
    expect(counter.fallbackReason).toBe('shared worker: the shared worker script failed to load; dedicated worker: Failed to fetch the worker script');
    expect(fake.spawned.map((s) => [s.kind, s.portClosed, s.terminated])).toEqual([
      ['shared', true, false],
      ['dedicated', false, true],
    ]);
    expect(await counter.countText(SAMPLES.code!)).toBe(o200k.countTokens(SAMPLES.code!, plain));
    counter.close();
  });

  it('a dedicated script that fails with no message gets the dedicated wording', async () => {
    install(() => ({ fail: '' }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.ready).toBe('in-thread');
    expect(counter.fallbackReason).toBe('dedicated worker: the dedicated worker script failed to load');
    counter.close();
  });

  it("worker: 'dedicated' never tries a shared worker", async () => {
    const fake = install();
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.ready).toBe('dedicated');
    expect(fake.spawned.map((s) => s.kind)).toEqual(['dedicated']);
    counter.close();
  });

  it('without SharedWorker (Safari before 16, Chrome on Android) the dedicated worker serves, and nothing is reported', async () => {
    const fake = install();
    vi.stubGlobal('SharedWorker', undefined);
    const counter = createTokenCounter();
    expect(await counter.ready).toBe('dedicated');
    expect(counter.fallbackReason).toBeNull();
    expect(fake.spawned.map((s) => s.kind)).toEqual(['dedicated']);
    counter.close();
  });

  it('with SharedWorker but no Worker, the shared worker serves, and close() releases it', async () => {
    const fake = install();
    vi.stubGlobal('Worker', undefined);
    const counter = createTokenCounter();
    expect(await counter.ready).toBe('shared');
    expect(counter.fallbackReason).toBeNull();
    expect(await counter.countText(SAMPLES.code!)).toBe(o200k.countTokens(SAMPLES.code!, plain));
    counter.close();
    await counter.ready;
    expect(fake.spawned.map((s) => [s.kind, s.portClosed])).toEqual([['shared', true]]);
  });

  it('without Worker either, the reason names both', async () => {
    install();
    vi.stubGlobal('SharedWorker', undefined);
    vi.stubGlobal('Worker', undefined);
    const counter = createTokenCounter();
    expect(await counter.ready).toBe('in-thread');
    expect(counter.fallbackReason).toBe('SharedWorker is not available; Worker is not available');
    const dedicated = createTokenCounter({ worker: 'dedicated' });
    expect(await dedicated.ready).toBe('in-thread');
    expect(dedicated.fallbackReason).toBe('Worker is not available');
    counter.close();
    dedicated.close();
  });

  it('a Worker constructor that throws (a URL the page may not load) falls back with its message, and nothing is left to release', async () => {
    const fake = install((kind) => ({ throws: `${kind} script blocked by worker-src` }));
    const counter = createTokenCounter();
    expect(await counter.ready).toBe('in-thread');
    expect(counter.fallbackReason).toBe('shared worker: shared script blocked by worker-src; dedicated worker: dedicated script blocked by worker-src');
    expect(fake.spawned).toEqual([]);
    expect(await counter.countText(SAMPLES.code!)).toBe(o200k.countTokens(SAMPLES.code!, plain));
    counter.close();
  });

  it('a worker that never answers its load falls back once startTimeoutMs has passed, and is released', async () => {
    fakeTimers();
    const fake = install(() => ({ silent: true }));
    const counter = createTokenCounter({ startTimeoutMs: 2_000 });
    // The first attempt starts synchronously; the second once the first one's budget is spent.
    const ready = counter.ready;
    expect(fake.spawned).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1_999);
    await turn();
    expect(fake.spawned).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await until(() => fake.spawned.length === 2);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await ready).toBe('in-thread');
    expect(counter.fallbackReason).toBe('shared worker: no answer within 2000 ms; dedicated worker: no answer within 2000 ms');
    expect(fake.spawned.map((s) => [s.kind, s.portClosed, s.terminated])).toEqual([
      ['shared', true, false],
      ['dedicated', false, true],
    ]);
    counter.close();
  });
});

describe('requests: budgets, restarts, aborts, bad replies', () => {
  it('a dedicated worker past its budget is terminated, the call resolves the estimate, and the next call starts a new worker', async () => {
    fakeTimers();
    const held = heldEngine();
    const fake = install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated', requestTimeoutMs: 1_000 });
    const text = 'stuck text';
    const measuring = counter.measureText(text);
    await held.call(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await measuring).toEqual({ tokens: estimateTextTokens(text), exact: false });
    expect(fake.spawned.map((s) => s.terminated)).toEqual([true]);
    expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 1 });

    const again = counter.measureText(text);
    (await held.call(1)).answer([3]);
    expect(await again).toEqual({ tokens: 3, exact: true });
    expect(fake.spawned.map((s) => s.terminated)).toEqual([true, false]);
    expect(counter.stats()).toEqual({ counted: 1, cached: 0, estimated: 1 });
    counter.close();
  });

  it('the budget is requestTimeoutMs plus 2 ms per 1,000 characters sent', async () => {
    fakeTimers();
    const held = heldEngine();
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'shared', requestTimeoutMs: 1_000 });
    // Two texts of 25,000 characters in one call: 50,000 characters, a budget of 1,100 ms.
    const texts = ['a b '.repeat(6_250), 'c d '.repeat(6_250)];
    const inTime = counter.measureEach(texts.map((content) => ({ role: 'user', content })));
    await vi.advanceTimersByTimeAsync(0);
    const first = await held.call(0);
    await vi.advanceTimersByTimeAsync(1_099);
    first.answer([10, 20]);
    expect((await inTime).map((m) => m.exact)).toEqual([true, true]);

    const late = counter.measureText('e f '.repeat(12_500));
    const second = await held.call(1);
    await vi.advanceTimersByTimeAsync(1_100);
    second.answer([30]);
    expect(await late).toMatchObject({ exact: false });
    counter.close();
  });

  it('a shared worker past its budget is kept (it serves other tabs): the next call goes to the same worker', async () => {
    fakeTimers();
    const held = heldEngine();
    const fake = install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ requestTimeoutMs: 500 });
    const measuring = counter.measureText('slow');
    await held.call(0);
    await vi.advanceTimersByTimeAsync(500);
    expect(await measuring).toMatchObject({ exact: false });
    const again = counter.countText('slow');
    (await held.call(1)).answer([1]);
    expect(await again).toBe(1);
    expect(fake.spawned.map((s) => [s.kind, s.portClosed])).toEqual([['shared', false]]);
    counter.close();
  });

  it('two calls past their budget at once restart the dedicated worker once', async () => {
    fakeTimers();
    const held = heldEngine();
    const fake = install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated', requestTimeoutMs: 500 });
    const both = [counter.measureText('one'), counter.measureText('two')];
    await held.call(1);
    await vi.advanceTimersByTimeAsync(500);
    expect(await Promise.all(both)).toEqual([
      { tokens: estimateTextTokens('one'), exact: false },
      { tokens: estimateTextTokens('two'), exact: false },
    ]);
    const again = counter.countText('three');
    (await held.call(2)).answer([1]);
    expect(await again).toBe(1);
    expect(fake.spawned.map((s) => s.terminated)).toEqual([true, false]);
    counter.close();
  });

  it('a worker whose call fails answers the estimate and is restarted', async () => {
    const held = heldEngine();
    const fake = install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const measuring = counter.measureText('doomed');
    (await held.call(0)).fail(new Error('out of memory'));
    expect(await measuring).toEqual({ tokens: estimateTextTokens('doomed'), exact: false });
    expect(fake.spawned.map((s) => s.terminated)).toEqual([true]);
    counter.close();
  });

  it('a count in flight when close() is called settles with the estimate, and no worker is started again', async () => {
    fakeTimers();
    const held = heldEngine();
    const fake = install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated', requestTimeoutMs: 500 });
    const measuring = counter.measureText('closing');
    await held.call(0);
    counter.close();
    await vi.advanceTimersByTimeAsync(500);
    expect(await measuring).toMatchObject({ exact: false });
    expect(fake.spawned.map((s) => s.terminated)).toEqual([true]);
    await expect(counter.countText('after')).rejects.toThrow(expect.objectContaining({ code: 'storage/closed', message: 'This token counter is closed; create a new one.' }) as Error);
    expect(fake.spawned).toHaveLength(1);
  });

  it('an abort reaches the worker as a cancel of that request, rejects tokens/aborted with the reason, and keeps the worker', async () => {
    const held = heldEngine();
    const fake = install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const controller = new AbortController();
    const counting = counter.countText('abort me', { signal: controller.signal, onProgress: () => undefined });
    const call = await held.call(0);
    controller.abort('user left');
    await expect(counting).rejects.toThrow(expect.objectContaining({ code: 'tokens/aborted', message: 'Counting was aborted.', cause: 'user left' }) as Error);
    expect(held.cancels).toEqual([call.id]);
    const again = counter.countText('still here');
    (await held.call(1)).answer([2]);
    expect(await again).toBe(2);
    expect(fake.spawned.map((s) => s.terminated)).toEqual([false]);
    counter.close();
  });

  it('progress the worker reports after the abort, before the count settles, is not passed on', async () => {
    const held = heldEngine();
    // The worker has not seen the cancel yet: its count stays in flight until the test fails it.
    install(() => ({ engine: () => ({ ...held.engine(), cancel: (id: string) => void held.cancels.push(id) }) }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const controller = new AbortController();
    const seen: number[] = [];
    const counting = counter.countText('abort me', { signal: controller.signal, onProgress: (done) => seen.push(done) });
    const call = await held.call(0);
    await call.progress?.(3, 8);
    controller.abort('user left');
    await call.progress?.(5, 8);
    expect(seen).toEqual([3]);
    const error = new Error('cancelled');
    error.name = 'AbortError';
    call.fail(error);
    await expect(counting).rejects.toThrow(expect.objectContaining({ code: 'tokens/aborted' }) as Error);
    expect(held.cancels).toEqual([call.id]);
    expect(seen).toEqual([3]);
    counter.close();
  });

  it('an abort after the count settled sends no cancel', async () => {
    const held = heldEngine((call) => (call.method === 'countLarge' ? 4 : call.texts.map(() => 1)));
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const controller = new AbortController();
    expect(await counter.countText('done soon', { signal: controller.signal, onProgress: () => undefined })).toBe(4);
    controller.abort();
    // A later call on the same port: a cancel sent on abort would have reached the engine first.
    expect(await counter.countText('next')).toBe(1);
    expect(held.cancels).toEqual([]);
    counter.close();
  });

  it('each request with progress or a signal gets its own id', async () => {
    const held = heldEngine(() => 1);
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    await counter.countText('one', { onProgress: () => undefined });
    await counter.countText('two', { onProgress: () => undefined });
    const ids = held.calls.map((c) => c.id);
    expect(ids.every((id) => id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(2);
    counter.close();
  });

  it('a count in windows (progress or a signal) is exact, and says so', async () => {
    const held = heldEngine(() => 7);
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.measureText('seven tokens', { onProgress: () => undefined })).toEqual({ tokens: 7, exact: true });
    expect(held.calls.map((c) => c.method)).toEqual(['countLarge']);
    expect(counter.stats()).toEqual({ counted: 1, cached: 0, estimated: 0 });
    counter.close();
  });

  it('progress: the caller hears the end exactly once, and nothing after the count settled', async () => {
    const held = heldEngine();
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const text = 'x'.repeat(100);

    const seen: [number, number][] = [];
    const partial = counter.countText(text, { onProgress: (done, total) => seen.push([done, total]) });
    const first = await held.call(0);
    await first.progress?.(40, 100);
    first.answer(9);
    expect(await partial).toBe(9);
    expect(seen).toEqual([
      [40, 100],
      [100, 100],
    ]);
    // A progress call that travels after the result is dropped.
    await first.progress?.(70, 100);
    expect(seen).toHaveLength(2);

    const full: [number, number][] = [];
    const whole = counter.countText(text, { onProgress: (done, total) => full.push([done, total]) });
    const second = await held.call(1);
    await second.progress?.(100, 100);
    second.answer(9);
    expect(await whole).toBe(9);
    expect(full).toEqual([[100, 100]]);
    counter.close();
  });

  it('a large count the worker gives up on (null) resolves the estimate', async () => {
    const held = heldEngine(() => null);
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.measureText('too slow', { onProgress: () => undefined })).toEqual({ tokens: estimateTextTokens('too slow'), exact: false });
    expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 1 });
    expect(await counter.measureEach([{ role: 'user', content: 'too slow' }])).toEqual([{ tokens: expect.any(Number) as number, exact: false }]);
    counter.close();
  });

  for (const bad of [-1, 1.5, '3', null, undefined, Number.NaN, [2]]) {
    // Shown as the message shows it: NaN and undefined as they are (JSON would say "null" for NaN and give
    // two tests one name, which a mutation run tells apart by name).
    const shown = typeof bad === 'number' || bad === undefined ? String(bad) : JSON.stringify(bad);
    it(`a worker reply of ${shown} for a text is refused with schema/invalid, and nothing is cached or counted`, async () => {
      // null or nothing as a large count's whole reply means "gave up" (the estimate, tested above); as one text's count in a batch it is nonsense.
      const held = heldEngine((call) => (call.method === 'countLarge' ? bad : [bad]));
      install(() => ({ engine: held.engine }));
      const counter = createTokenCounter({ worker: 'dedicated' });
      const refused = expect.objectContaining({ code: 'schema/invalid', message: `The token worker answered ${shown} for a text; expected a whole number ≥ 0.` }) as Error;
      await expect(counter.countText('hello')).rejects.toThrow(refused);
      if (bad !== null && bad !== undefined) await expect(counter.countText('hello', { onProgress: () => undefined })).rejects.toThrow(refused);
      expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 0 });
      counter.close();
    });
  }

  it('only the texts the cache misses are sent; a call the cache answers whole sends nothing', async () => {
    const held = heldEngine((call) => call.texts.map((t) => t.length));
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.measureEach([{ role: 'user', content: 'abc' }])).toEqual([{ tokens: expect.any(Number) as number, exact: true }]);
    const [cached] = await counter.measureEach([{ role: 'user', content: 'abc' }]);
    expect(cached?.exact).toBe(true);
    await counter.countEach([
      { role: 'user', content: 'abc' },
      { role: 'user', content: 'defg' },
    ]);
    expect(held.calls.map((c) => c.texts.length)).toEqual([1, 1]);
    expect(counter.stats()).toEqual({ counted: 2, cached: 2, estimated: 0 });
    counter.close();
  });

  it('an empty list counts 0 and sends nothing', async () => {
    const held = heldEngine((call) => call.texts.map(() => 1));
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.count([])).toBe(0);
    expect(await counter.countEach([])).toEqual([]);
    expect(await counter.measureEach([])).toEqual([]);
    expect(held.calls).toEqual([]);
    expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 0 });
    counter.close();
  });

  it('a text too large to cache evicts nothing from the cache', async () => {
    const held = heldEngine((call) => call.texts.map((t) => t.length));
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated', cacheSize: 1 });
    const large = 'y'.repeat(256 * 1024);
    expect(await counter.countText('small')).toBe(5);
    expect(await counter.countText(large)).toBe(large.length);
    expect(await counter.countText('small')).toBe(5);
    expect(held.calls.map((c) => c.texts[0]?.length)).toEqual([5, large.length]);
    expect(counter.stats()).toEqual({ counted: 2, cached: 1, estimated: 0 });
    counter.close();
  });

  it('a signal alone sends a short text as one plain count (cached); a large one is counted in windows', async () => {
    const held = heldEngine((call) => (call.method === 'countLarge' ? 5 : call.texts.map(() => 1)));
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const { signal } = new AbortController();
    await counter.countText('short', { signal });
    await counter.countText('short', { signal });
    const large = 'y'.repeat(256 * 1024);
    await counter.countText(large, { signal });
    await counter.countText(large.slice(1), { signal });
    expect(held.calls.map((c) => c.method)).toEqual(['countTexts', 'countLarge', 'countTexts']);
    expect(counter.stats()).toEqual({ counted: 3, cached: 1, estimated: 0 });
    counter.close();
  });

  it('close() releases the worker: a dedicated one is terminated, a shared one has its port closed', async () => {
    const fake = install();
    const shared = createTokenCounter();
    const dedicated = createTokenCounter({ worker: 'dedicated' });
    await Promise.all([shared.ready, dedicated.ready]);
    shared.close();
    dedicated.close();
    shared.close();
    // The disposal runs on the started backend's promise, ahead of anything chained later.
    await Promise.all([shared.ready, dedicated.ready]);
    expect(fake.spawned.map((s) => [s.kind, s.portClosed, s.terminated])).toEqual([
      ['shared', true, false],
      ['dedicated', false, true],
    ]);
  });
});

describe('defaults and the cache', () => {
  it('the request budget is 10 s by default', async () => {
    fakeTimers();
    const held = heldEngine();
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    const inTime = counter.measureText('a');
    await vi.advanceTimersByTimeAsync(0);
    const first = await held.call(0);
    await vi.advanceTimersByTimeAsync(9_999);
    first.answer([1]);
    expect(await inTime).toEqual({ tokens: 1, exact: true });
    const late = counter.measureText('b');
    const second = await held.call(1);
    await vi.advanceTimersByTimeAsync(10_001);
    second.answer([1]);
    expect(await late).toMatchObject({ exact: false });
    counter.close();
  });

  it('no budget timer outlives its request: none is pending once the worker has started, or has answered', async () => {
    fakeTimers();
    const held = heldEngine((call) => (call.method === 'countLarge' ? 4 : call.texts.map(() => 1)));
    install(() => ({ engine: held.engine }));
    const counter = createTokenCounter({ worker: 'dedicated' });
    expect(await counter.ready).toBe('dedicated');
    expect(vi.getTimerCount()).toBe(0);
    expect(await counter.countText('one')).toBe(1);
    expect(await counter.countText('two', { onProgress: () => undefined })).toBe(4);
    expect(vi.getTimerCount()).toBe(0);
    counter.close();
  });

  it('the start budget is 15 s by default', async () => {
    fakeTimers();
    const fake = install(() => ({ silent: true }));
    const counter = createTokenCounter();
    const ready = counter.ready;
    await vi.advanceTimersByTimeAsync(14_999);
    await turn();
    expect(fake.spawned).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await until(() => fake.spawned.length === 2);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(await ready).toBe('in-thread');
    counter.close();
  });

  it('the cache holds 50,000 texts by default, and cacheSize entries when given', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    const texts = Array.from({ length: 50_001 }, (_, i) => ({ role: 'user' as const, content: `t${i}` }));
    await counter.countEach(texts);
    // The first text was evicted by the 50,001st; the second is still there.
    await counter.countEach([texts[1]!, texts[0]!]);
    expect(counter.stats()).toEqual({ counted: 50_002, cached: 1, estimated: 0 });
    counter.close();

    const small = createTokenCounter({ worker: 'none', cacheSize: 1 });
    for (const text of ['a', 'b', 'b', 'a']) await small.countText(text);
    expect(small.stats()).toEqual({ counted: 3, cached: 1, estimated: 0 });
    small.close();
  }, 60_000);

  it('texts of 256 KB and more are not cached; shorter ones are', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    const limit = 256 * 1024;
    const large = `${'word '.repeat(Math.floor(limit / 5))}${'w'.repeat(limit % 5)}`;
    expect(large).toHaveLength(limit);
    const first = await counter.measureText(large);
    expect(await counter.measureText(large)).toEqual(first);
    expect(counter.stats()).toEqual({ counted: 2, cached: 0, estimated: 0 });
    const below = large.slice(1);
    await counter.measureText(below);
    expect(await counter.measureText(below)).toEqual({ tokens: expect.any(Number) as number, exact: true });
    expect(counter.stats()).toEqual({ counted: 3, cached: 1, estimated: 0 });
    counter.close();
  }, 60_000);
});
