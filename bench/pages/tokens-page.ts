/**
 * In-page half of the token benchmark (bench/tokens.bench.ts). Baselines
 * are gpt-tokenizer called in this page's own thread.
 */
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { createTokenCounter, openTabula, type Message, type WorkerTokenCounter } from '../../src/index.js';
import { code, english } from './corpus.js';
import { expose } from './expose.js';

const plain = { disallowedSpecial: new Set<string>() };
let longTasks: number[] = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) longTasks.push(entry.duration);
}).observe({ type: 'longtask', buffered: false });

/** Longest gap between animation frames while `work` runs: what a user would feel as a stutter. */
async function watchFrames<T>(work: () => Promise<T>): Promise<{ value: T; maxFrameGapMs: number; maxLongTaskMs: number; ms: number }> {
  longTasks = [];
  let last = performance.now();
  let maxGap = 0;
  let running = true;
  const frame = () => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
    if (running) requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const start = performance.now();
  const value = await work();
  const ms = performance.now() - start;
  await new Promise((resolve) => setTimeout(resolve, 50));
  running = false;
  return { value, maxFrameGapMs: maxGap, maxLongTaskMs: Math.max(0, ...longTasks), ms };
}

let counter: WorkerTokenCounter | null = null;

const bench = {
  async startCounter(worker: 'shared' | 'dedicated' | 'none') {
    const start = performance.now();
    counter = createTokenCounter({ worker });
    const tokens = await counter.countText('The first count waits for the worker and its encoding.');
    return { firstCountMs: performance.now() - start, mode: counter.mode, tokens };
  },
  /**
   * One long unbroken run (one pre-token): the worker counter against gpt-tokenizer in this thread,
   * whose merge is quadratic in the run's length. Counts must be equal.
   */
  async longRun(char: string, chars: number) {
    if (!counter) throw new Error('startCounter() first');
    const text = char.repeat(chars);
    let start = performance.now();
    const workerTokens = await counter.countText(text);
    const workerMs = performance.now() - start;
    start = performance.now();
    const pageTokens = countTokens(text, plain);
    const pageMs = performance.now() - start;
    return { workerMs, pageMs, exactCheck: workerTokens === pageTokens };
  },
  /** Throughput of the worker counter and of gpt-tokenizer in this thread, on fresh text each. */
  async throughput(kind: 'english' | 'code', chars: number, seed: number) {
    if (!counter) throw new Error('startCounter() first');
    const make = kind === 'english' ? english : code;
    const forWorker = make(chars, seed);
    const forPage = make(chars, seed + 1);
    let start = performance.now();
    const workerTokens = await counter.countText(forWorker);
    const workerMs = performance.now() - start;
    start = performance.now();
    const pageTokens = countTokens(forPage, plain);
    const pageMs = performance.now() - start;
    return { workerMs, pageMs, workerTokens, pageTokens, exactCheck: workerTokens === countTokens(forWorker, plain) };
  },
  /** The longest main-thread task and frame gap while counting `chars` of text, in the worker and in this thread. */
  async blocking(chars: number, seed: number) {
    if (!counter) throw new Error('startCounter() first');
    const a = english(chars, seed);
    const b = english(chars, seed + 7);
    const worker = await watchFrames(() => counter!.countText(a));
    const inThread = await watchFrames(async () => countTokens(b, plain));
    return { worker, inThread };
  },
  /** session.tokens() after one append to an n-message session, vs recounting every message. */
  async incremental(n: number, runs: number) {
    if (!counter) throw new Error('startCounter() first');
    const tabula = await openTabula({ name: `bench-tokens-${Date.now()}`, tokenCounter: counter });
    const session = await tabula.session('long');
    const messages: Message[] = Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: english(300, 10_000 + i) }));
    for (let i = 0; i < n; i += 2000) await session.append(messages.slice(i, i + 2000));
    await session.tokens();
    const incremental: number[] = [];
    for (let i = 0; i < runs; i++) {
      await session.append({ role: 'user', content: english(300, 50_000 + i) });
      const start = performance.now();
      await session.tokens();
      incremental.push(performance.now() - start);
    }
    const full: number[] = [];
    for (let i = 0; i < 3; i++) {
      // A full recount: read every message and count it with a fresh (cold-cache) counter of the same mode.
      const fresh = createTokenCounter({ worker: counter.mode === 'in-thread' ? 'none' : counter.mode });
      await fresh.ready;
      const start = performance.now();
      await fresh.count(await session.messages());
      full.push(performance.now() - start);
      fresh.close();
    }
    await tabula.close();
    return { incremental, full };
  },
  close() {
    counter?.close();
    counter = null;
  },
};

expose(bench);
