/**
 * Sessions on IndexedDB, in the system Chromium.
 * 1. Append one message to a session of N messages: Tabula vs a naive store
 *    that keeps the session as one record and rewrites it per append.
 *    Goal: Tabula's median flat in N (100k / 100 below 2).
 * 2. Open a session of 100k messages and read its last 50: Tabula vs raw
 *    IndexedDB (reverse cursor, 50 rows). Goal: within 1.5× of raw.
 */
import { callPage, startBenchBrowser } from './lib/browser.js';
import { summarise } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const SIZES = [100, 1_000, 10_000, 100_000];
const APPEND_RUNS = 60;
const NAIVE_RUNS = (n: number) => (n >= 100_000 ? 10 : n >= 10_000 ? 20 : 60);
const READ_RUNS = 100;

interface PageBench {
  seed(n: number): Promise<number>;
  naiveSeed(n: number): Promise<void>;
  appendSamples(n: number, runs: number): Promise<number[]>;
  naiveAppendSamples(n: number, runs: number): Promise<number[]>;
  readLastSamples(n: number, runs: number): Promise<number[]>;
  rawReadLastSamples(n: number, runs: number): Promise<number[]>;
}

const env = await startBenchBrowser();
try {
  const page = await env.open('/bench/pages/sessions.html');
  const call = <K extends keyof PageBench>(method: K, ...args: Parameters<PageBench[K]>) =>
    callPage(page, method, ...args) as ReturnType<PageBench[K]>;

  const rows: BenchRow[] = [];
  const appendMedians = new Map<number, number>();
  for (const n of SIZES) {
    const seedMs = await call('seed', n);
    await call('naiveSeed', n);
    // Interleave halves so drift on a shared machine hits both sides alike.
    const tabula = [...(await call('appendSamples', n, APPEND_RUNS / 2)), ...(await call('appendSamples', n, APPEND_RUNS / 2))];
    const naive = [...(await call('naiveAppendSamples', n, NAIVE_RUNS(n) / 2)), ...(await call('naiveAppendSamples', n, NAIVE_RUNS(n) / 2))];
    const t = summarise(tabula);
    const b = summarise(naive);
    appendMedians.set(n, t.medianMs);
    rows.push({
      case: `append 1 message, N=${n.toLocaleString('en')}`,
      unit: 'ms (median)',
      tabula: t.medianMs,
      baseline: b.medianMs,
      ratio: t.medianMs / b.medianMs,
      note: `p95 ${t.p95Ms.toFixed(2)} vs ${b.p95Ms.toFixed(2)}; seeded in ${(seedMs / 1000).toFixed(1)} s`,
    });
    console.log(`N=${n}: tabula ${t.medianMs.toFixed(2)} ms, naive ${b.medianMs.toFixed(2)} ms`);
  }
  const flatness = (appendMedians.get(100_000) ?? NaN) / (appendMedians.get(100) ?? NaN);

  const big = SIZES[SIZES.length - 1] as number;
  const ours: number[] = [];
  const raw: number[] = [];
  for (let i = 0; i < 4; i++) {
    ours.push(...(await call('readLastSamples', big, READ_RUNS / 4)));
    raw.push(...(await call('rawReadLastSamples', big, READ_RUNS / 4)));
  }
  const o = summarise(ours);
  const r = summarise(raw);
  rows.push({
    case: `open session + last 50, N=${big.toLocaleString('en')}`,
    unit: 'ms (median)',
    tabula: o.medianMs,
    baseline: r.medianMs,
    ratio: o.medianMs / r.medianMs,
    note: `p95 ${o.p95Ms.toFixed(2)} vs ${r.p95Ms.toFixed(2)}; baseline: raw IDBIndex.openCursor('prev'), 50 rows`,
  });

  report({
    name: 'sessions',
    title: 'Sessions on IndexedDB (Chromium)',
    baseline: 'append: a naive store keeping the session as one record, rewritten per append; read: raw IndexedDB reverse cursor',
    rows,
    goals: [
      `append median flat in N: 100k / 100 = ${flatness.toFixed(2)} (goal < 2)`,
      `last 50 at 100k: ${(o.medianMs / r.medianMs).toFixed(2)}× raw (goal ≤ 1.5×)`,
    ],
  });
  console.log(`append flatness (median at 100k / at 100): ${flatness.toFixed(2)} (goal < 2)`);
  console.log(`read last 50 vs raw: ${(o.medianMs / r.medianMs).toFixed(2)}× (goal ≤ 1.5×)`);
} finally {
  await env.close();
}
