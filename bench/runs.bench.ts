/**
 * Runs in the system Chromium.
 * 1. Cost of the gate: run(async () => {}) on an idle session vs a bare
 *    navigator.locks.request in the same page (the run also writes its
 *    start and end rows: two IndexedDB transactions).
 * 2. Interrupt latency across tabs: from interrupt() in tab B to the abort
 *    event in tab A (one way, clocks of two tabs of one browser), and the
 *    full round trip until B's interrupt() resolves (A's acknowledgement).
 */
import { callPage, startBenchBrowser } from './lib/browser.js';
import { summarise } from './lib/measure.js';
import { report } from './lib/report.js';

const GATE_RUNS = 200;
const INTERRUPTS = 100;

const call = callPage;

const env = await startBenchBrowser();
try {
  const a = await env.open('/bench/pages/runs.html');
  const b = await env.open('/bench/pages/runs.html');
  const dbName = `bench-runs-${Date.now()}`;
  await call(a, 'open', dbName);
  await call(b, 'open', dbName);

  const gate: number[] = [];
  const lock: number[] = [];
  for (let i = 0; i < 4; i++) {
    gate.push(...(await call<number[]>(a, 'gateSamples', GATE_RUNS / 4)));
    lock.push(...(await call<number[]>(a, 'lockSamples', GATE_RUNS / 4)));
  }

  const oneWay: number[] = [];
  const roundTrip: number[] = [];
  for (let i = 0; i < INTERRUPTS; i++) {
    await call(a, 'holdRun');
    const sent = await call<{ sentAt: number; ackMs: number; delivered: boolean }>(b, 'interrupt');
    if (!sent.delivered) throw new Error('interrupt was not delivered');
    let abortedAt = 0;
    while (abortedAt === 0) abortedAt = await call<number>(a, 'abortedAt');
    oneWay.push(abortedAt - sent.sentAt);
    roundTrip.push(sent.ackMs);
  }

  const g = summarise(gate);
  const l = summarise(lock);
  const o = summarise(oneWay);
  const r = summarise(roundTrip);
  report({
    name: 'runs',
    title: 'Runs (Chromium)',
    baseline: 'a bare navigator.locks.request in the same page; interrupt latencies have no baseline',
    rows: [
      { case: 'run(async () => {}) on an idle session', unit: 'ms (median)', tabula: g.medianMs, baseline: l.medianMs, ratio: g.medianMs / l.medianMs, note: `p95 ${g.p95Ms.toFixed(2)} vs ${l.p95Ms.toFixed(2)}; includes 2 IndexedDB transactions` },
      { case: 'interrupt(): tab B call → abort event in tab A', unit: 'ms (median)', tabula: o.medianMs, baseline: NaN, note: `p95 ${o.p95Ms.toFixed(2)} ms over ${INTERRUPTS}` },
      { case: 'interrupt(): round trip until B is acknowledged', unit: 'ms (median)', tabula: r.medianMs, baseline: NaN, note: `p95 ${r.p95Ms.toFixed(2)} ms` },
    ],
    goals: [`interrupt one-way p95 ${o.p95Ms.toFixed(2)} ms (goal: abort within 100 ms)`],
  });
} finally {
  await env.close();
}
