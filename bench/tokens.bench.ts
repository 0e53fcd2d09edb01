/**
 * Token counting in the system Chromium. Baseline: gpt-tokenizer called
 * in the page's own thread, in the same page and run.
 * 1. Throughput on 5 MB of English-like and 5 MB of code-like text (goal:
 *    the worker at least 0.9× the in-page speed).
 * 2. Main-thread blocking while counting 10 MB (goal: no task over 50 ms
 *    with the worker).
 * 3. session.tokens() after one append to a 10k-message session vs a full
 *    recount (goal: at least 100× faster).
 * 4. First count latency (worker start + encoding load): shared vs
 *    dedicated, and a second tab joining a running shared worker.
 * 5. One long unbroken run (40K of `a`, of `=`): the worker against
 *    gpt-tokenizer's quadratic merge in the page (goal: exact, and at least
 *    10× faster).
 */
import { callPage, startBenchBrowser } from './lib/browser.js';
import { summarise } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const MB = 1024 * 1024;
const call = callPage;

interface Start {
  firstCountMs: number;
  mode: string;
}

const env = await startBenchBrowser();
try {
  const rows: BenchRow[] = [];

  // 4. Cold starts, each in a fresh page so no worker is alive yet.
  const cold = async (worker: 'shared' | 'dedicated') => {
    const page = await env.open('/bench/pages/tokens.html');
    const start = await call<Start>(page, 'startCounter', worker);
    return { page, start };
  };
  const dedicated = await cold('dedicated');
  await dedicated.page.close();
  const shared = await cold('shared');
  const joiner = await env.open('/bench/pages/tokens.html');
  const joined = await call<Start>(joiner, 'startCounter', 'shared');
  await joiner.close();
  await shared.page.close();
  rows.push(
    { case: 'first count, cold shared worker', unit: 'ms', tabula: shared.start.firstCountMs, baseline: dedicated.start.firstCountMs, ratio: shared.start.firstCountMs / dedicated.start.firstCountMs, note: 'baseline: cold dedicated worker' },
    { case: 'first count, second tab joining the shared worker', unit: 'ms', tabula: joined.firstCountMs, baseline: dedicated.start.firstCountMs, ratio: joined.firstCountMs / dedicated.start.firstCountMs, note: 'the encoding is already loaded' },
  );

  const page = await env.open('/bench/pages/tokens.html');
  const mode = (await call<Start>(page, 'startCounter', 'dedicated')).mode;

  // 1. Throughput.
  for (const kind of ['english', 'code'] as const) {
    const worker: number[] = [];
    const inPage: number[] = [];
    for (let run = 0; run < 5; run++) {
      const r = await call<{ workerMs: number; pageMs: number; exactCheck: boolean }>(page, 'throughput', kind, 5 * MB, 100 + run);
      if (!r.exactCheck) throw new Error('the worker count differs from gpt-tokenizer');
      worker.push(5 / (r.workerMs / 1000));
      inPage.push(5 / (r.pageMs / 1000));
    }
    const w = summarise(worker).medianMs;
    const p = summarise(inPage).medianMs;
    rows.push({ case: `throughput, 5 MB ${kind} (${mode} worker)`, unit: 'MB/s (median of 5)', tabula: w, baseline: p, ratio: w / p, note: 'baseline: gpt-tokenizer in the page thread; goal ≥ 0.9×' });
  }

  // 1b. Long unbroken runs: one pre-token each, quadratic in gpt-tokenizer.
  for (const [char, chars] of [['a', 40_000], ['=', 40_000]] as const) {
    const r = await call<{ workerMs: number; pageMs: number; exactCheck: boolean }>(page, 'longRun', char, chars);
    if (!r.exactCheck) throw new Error(`the worker count of a run of ${char} differs from gpt-tokenizer`);
    rows.push({ case: `one run of ${chars / 1000}K × "${char}" (${mode} worker)`, unit: 'ms', tabula: r.workerMs, baseline: r.pageMs, ratio: r.workerMs / r.pageMs, note: 'baseline: gpt-tokenizer in the page thread (quadratic merge); counts equal' });
  }

  // 2. Blocking.
  const blocking = await call<{ worker: { maxLongTaskMs: number; maxFrameGapMs: number; ms: number }; inThread: { maxLongTaskMs: number; maxFrameGapMs: number; ms: number } }>(page, 'blocking', 10 * MB, 7);
  rows.push(
    { case: 'longest main-thread task while counting 10 MB', unit: 'ms', tabula: blocking.worker.maxLongTaskMs, baseline: blocking.inThread.maxLongTaskMs, ratio: blocking.worker.maxLongTaskMs / blocking.inThread.maxLongTaskMs, note: 'longtask observer (0 = none over 50 ms); goal: none over 50 ms' },
    { case: 'longest gap between frames while counting 10 MB', unit: 'ms', tabula: blocking.worker.maxFrameGapMs, baseline: blocking.inThread.maxFrameGapMs, ratio: blocking.worker.maxFrameGapMs / blocking.inThread.maxFrameGapMs, note: `counting took ${(blocking.worker.ms / 1000).toFixed(1)} s vs ${(blocking.inThread.ms / 1000).toFixed(1)} s` },
  );

  // 3. Incremental.
  const inc = await call<{ incremental: number[]; full: number[] }>(page, 'incremental', 10_000, 20);
  const i = summarise(inc.incremental).medianMs;
  const f = summarise(inc.full).medianMs;
  rows.push({ case: 'session.tokens() after 1 append, 10k messages', unit: 'ms (median)', tabula: i, baseline: f, ratio: i / f, note: `${(f / i).toFixed(0)}× faster; baseline: read all and recount with a cold counter` });
  await call(page, 'close');

  report({
    name: 'tokens',
    title: 'Token counting (Chromium)',
    baseline: 'gpt-tokenizer in the page thread; a full recount; a cold dedicated worker',
    rows,
    goals: [
      `worker throughput ≥ 0.9× in-page: english ${rows[2]?.ratio?.toFixed(2)}×, code ${rows[3]?.ratio?.toFixed(2)}×`,
      `no main-thread task over 50 ms with the worker: longest ${blocking.worker.maxLongTaskMs.toFixed(0)} ms`,
      `incremental at least 100× faster than a full recount: ${(f / i).toFixed(0)}×`,
      `long runs exact and at least 10× faster than gpt-tokenizer in the page: ${rows
        .filter((row) => row.case.startsWith('one run'))
        .map((row) => `${(1 / (row.ratio ?? 1)).toFixed(0)}×`)
        .join(', ')}`,
    ],
  });
} finally {
  await env.close();
}
