/**
 * The token counter in a real browser: SharedWorker, dedicated Worker and
 * in-thread modes all give gpt-tokenizer's own counts; a broken worker URL
 * falls back without throwing; a 5 MB text counts with progress and can be
 * cancelled; sessions count exactly by default.
 */
import { afterAll, describe, expect, it } from 'vitest';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { createTokenCounter, messageTokenText, openTabula, type Message, type WorkerTokenCounter } from '../../src/index.js';
import { SAMPLES } from '../unit/tokens/samples.js';

const plain = { disallowedSpecial: new Set<string>() };
const reference = { o200k_base: o200k.countTokens, cl100k_base: cl100k.countTokens } as const;
const opened: WorkerTokenCounter[] = [];
const make = (...args: Parameters<typeof createTokenCounter>) => {
  const counter = createTokenCounter(...args);
  opened.push(counter);
  return counter;
};
afterAll(() => opened.forEach((counter) => counter.close()));

describe('token counter in Chromium', () => {
  for (const worker of ['shared', 'dedicated', 'none'] as const) {
    for (const encoding of ['o200k_base', 'cl100k_base'] as const) {
      it(`${worker} / ${encoding}: equals gpt-tokenizer on the sample set`, async () => {
        const counter = make({ worker, encoding });
        expect(await counter.ready).toBe(worker === 'none' ? 'in-thread' : worker);
        expect(counter.fallbackReason).toBeNull();
        for (const [label, text] of Object.entries(SAMPLES)) {
          expect(await counter.countText(text), label).toBe(reference[encoding](text, plain));
        }
      });
    }
  }

  it('counts messages once: a second count of the same messages is answered from the cache', async () => {
    const counter = make({ worker: 'dedicated' });
    const messages: Message[] = Object.values(SAMPLES).map((content) => ({ role: 'user', content }));
    const first = await counter.count(messages);
    const afterFirst = counter.stats();
    const second = await counter.count([...messages, { role: 'assistant', content: 'one new message' }]);
    const afterSecond = counter.stats();
    expect(afterSecond.counted - afterFirst.counted).toBe(1);
    expect(afterSecond.cached - afterFirst.cached).toBe(messages.length);
    expect(second - first).toBe(o200k.countTokens(messageTokenText({ role: 'assistant', content: 'one new message' }), plain) + 4);
  });

  it('falls back to the page thread when the worker script is missing, and keeps counting', async () => {
    const counter = make({ worker: 'dedicated', workerUrl: '/no/such/worker.js' });
    expect(await counter.ready).toBe('in-thread');
    expect(counter.mode).toBe('in-thread');
    expect(counter.fallbackReason).toMatch(/dedicated worker/);
    expect(await counter.countText(SAMPLES.english!)).toBe(o200k.countTokens(SAMPLES.english!, plain));
  });

  it('a 5 MB text counts with progress, and can be cancelled', async () => {
    const counter = make({ worker: 'dedicated' });
    await counter.ready;
    const text = `${SAMPLES.english}\n${SAMPLES.code}`.repeat(26_000).slice(0, 5 * 1024 * 1024);
    const progress: number[] = [];
    const tokens = await counter.countText(text, { onProgress: (done) => progress.push(done) });
    expect(tokens).toBe(o200k.countTokens(text, plain));
    expect(progress.length).toBeGreaterThan(10);
    // The end is reported once, last, even when the worker's last progress call arrives after the result.
    expect(progress.at(-1)).toBe(text.length);
    expect(progress.filter((done) => done === text.length)).toHaveLength(1);

    const other = `${SAMPLES.code}\n${SAMPLES.english}`.repeat(26_000).slice(0, 5 * 1024 * 1024);
    const controller = new AbortController();
    let calls = 0;
    const cancelled = counter.countText(other, {
      signal: controller.signal,
      onProgress: () => {
        calls += 1;
        if (calls === 3) controller.abort('user cancelled');
      },
    });
    // Rejected, so the worker stopped (had the cancel not reached it, the count would have resolved); and the
    // caller heard no progress after its abort, however far the worker got before the cancel arrived (a bound
    // such as "< 20" depended on the machine's load: 28 were delivered beside another test run).
    await expect(cancelled).rejects.toMatchObject({ code: 'tokens/aborted' });
    expect(calls).toBe(3);
    // The worker is still usable afterwards.
    expect(await counter.countText('still here')).toBe(o200k.countTokens('still here', plain));
  });

  it('one tab’s cancel never cancels another tab’s count in the shared worker (issue 10 item 10)', async () => {
    // Two counters are two tabs' connections to one SharedWorker; each numbers its requests from c1.
    const [tabA, tabB] = [make({ worker: 'shared' }), make({ worker: 'shared' })];
    expect(await Promise.all([tabA.ready, tabB.ready])).toEqual(['shared', 'shared']);
    const textB = `${SAMPLES.code}\n${SAMPLES.english}`.repeat(8_000);
    const textA = `${SAMPLES.english}\n${SAMPLES.code}`.repeat(8_000);
    const controller = new AbortController();
    const tabAOutcome: { settled: Promise<unknown> | null } = { settled: null };
    const countingB = tabB.countText(textB, {
      onProgress: () => {
        // While tab B's c1 is half-way, tab A starts its own c1 and cancels it.
        tabAOutcome.settled ??= tabA.countText(textA, { signal: controller.signal, onProgress: () => controller.abort('tab A cancels') }).then(
          () => 'resolved',
          (error: unknown) => error,
        );
      },
    });
    expect(await countingB).toBe(o200k.countTokens(textB, plain));
    expect(await tabAOutcome.settled).toMatchObject({ code: 'tokens/aborted' });
  });

  it('a worker that does not answer in time gives an estimate marked exact: false, never cached (issue 10 item 8)', async () => {
    const counter = make({ worker: 'dedicated', workerUrl: new URL('./fixtures/silent-token-worker.ts', import.meta.url), requestTimeoutMs: 50 });
    expect(await counter.ready).toBe('dedicated');
    const message: Message = { role: 'user', content: SAMPLES.english! };
    expect(await counter.measureEach([message])).toEqual([{ tokens: expect.any(Number) as number, exact: false }]);
    expect(await counter.measureText(SAMPLES.code!)).toMatchObject({ exact: false });
    // Nothing was cached: asked again, the counter asks the worker again (and estimates again).
    expect(await counter.measureEach([message])).toEqual([{ tokens: expect.any(Number) as number, exact: false }]);
    expect(counter.stats()).toEqual({ counted: 0, cached: 0, estimated: 3 });
  });

  it('is the default counter of openTabula: session.tokens() is exact', async () => {
    const tabula = await openTabula({ name: `tokens-${Date.now()}` });
    const session = await tabula.session('s');
    const messages: Message[] = [
      { role: 'user', content: SAMPLES.japanese! },
      { role: 'assistant', content: SAMPLES.code! },
    ];
    await session.append(messages);
    const exact = messages.reduce((sum, m) => sum + o200k.countTokens(messageTokenText(m), plain) + 4, 0);
    expect(await session.tokens()).toBe(exact);
    await tabula.close();
  });
});
