/**
 * Blackboard in the system Chromium.
 * 1. Cross-tab propagation: set() in tab A → observe() in tab B, one way,
 *    vs a raw BroadcastChannel message between the same tabs (and its
 *    round trip). Goal: median within 2× of raw.
 * 2. A board of 10k keys written over 100k updates: stored size and load
 *    time before and after compaction.
 */
import type { Page } from '@playwright/test';
import { callPage, startBenchBrowser } from './lib/browser.js';
import { quantile, summarise } from './lib/measure.js';
import { report } from './lib/report.js';

const PINGS = Number(process.env.PINGS ?? 300);
const KEYS = Number(process.env.KEYS ?? 10_000);
const UPDATES = Number(process.env.UPDATES ?? 100_000);

const call = callPage;

async function waitFor(page: Page, method: string, i: number): Promise<number> {
  for (let tries = 0; tries < 2000; tries++) {
    const at = await call<number>(page, method, i);
    if (at > 0) return at;
  }
  throw new Error(`${method}(${i}) never arrived`);
}

const env = await startBenchBrowser();
try {
  const a = await env.open('/bench/pages/blackboard.html');
  const b = await env.open('/bench/pages/blackboard.html');
  const dbName = `bench-board-${Date.now()}`;
  await call(a, 'open', dbName);
  await call(b, 'open', dbName);

  const ours: number[] = [];
  const rawOneWay: number[] = [];
  const rawRoundTrip: number[] = [];
  for (let i = 1; i <= PINGS; i++) {
    const sent = await call<number>(a, 'ping', i);
    ours.push((await waitFor(b, 'receivedAt', i)) - sent);
    const rawSent = await call<number>(a, 'rawPing', i);
    rawOneWay.push((await waitFor(b, 'rawReceivedAt', i)) - rawSent);
    rawRoundTrip.push(await call<number>(a, 'rawRoundTrip', i));
  }
  const o = summarise(ours);
  const r = summarise(rawOneWay);
  const rt = summarise(rawRoundTrip);

  const big = await call<{
    writeMs: number;
    before: { loadMs: number; bytes: number; rows: number; keysLoaded: number };
    compaction: { loadMs: number; bytes: number; rows: number };
    after: { loadMs: number; bytes: number; rows: number; keysLoaded: number };
  }>(a, 'bigBoard', `bench-big-${Date.now()}`, KEYS, UPDATES);
  if (big.before.keysLoaded !== KEYS || big.after.keysLoaded !== KEYS) throw new Error('the big board did not load all its keys');

  const kib = (bytes: number) => bytes / 1024;
  report({
    name: 'blackboard',
    title: 'Blackboard (Chromium)',
    baseline: 'propagation: a raw BroadcastChannel message between the same two tabs; size/load: the same board before compaction',
    rows: [
      { case: 'set() in A → observe() in B vs raw round trip A → B → A', unit: 'ms (median)', tabula: o.medianMs, baseline: rt.medianMs, ratio: o.medianMs / rt.medianMs, note: 'the issue’s baseline' },
      { case: 'set() in A → observe() in B vs raw round trip A → B → A', unit: 'ms (p99)', tabula: p99(ours), baseline: p99(rawRoundTrip), ratio: p99(ours) / p99(rawRoundTrip) },
      { case: 'set() in A → observe() in B vs raw one-way A → B', unit: 'ms (median)', tabula: o.medianMs, baseline: r.medianMs, ratio: o.medianMs / r.medianMs, note: 'a stricter baseline' },
      { case: `load ${KEYS.toLocaleString('en')} keys / ${UPDATES.toLocaleString('en')} updates`, unit: 'ms', tabula: big.after.loadMs, baseline: big.before.loadMs, ratio: big.after.loadMs / big.before.loadMs, note: 'tabula: after compaction; baseline: the uncompacted log' },
      { case: 'stored size', unit: 'KiB', tabula: kib(big.after.bytes), baseline: kib(big.before.bytes), ratio: big.after.bytes / big.before.bytes, note: `${big.after.rows} row(s) vs ${big.before.rows} rows` },
      { case: 'compaction (load + merge into one row)', unit: 'ms', tabula: big.compaction.loadMs, baseline: NaN, note: `writing the ${UPDATES.toLocaleString('en')} updates took ${(big.writeMs / 1000).toFixed(1)} s` },
    ],
    goals: [
      `propagation median ${(o.medianMs / rt.medianMs).toFixed(2)}× a raw BroadcastChannel round trip (goal ≤ 2×)`,
      `propagation median ${(o.medianMs / r.medianMs).toFixed(2)}× a raw one-way message`,
    ],
  });
} finally {
  await env.close();
}

function p99(samples: number[]): number {
  return quantile([...samples].sort((x, y) => x - y), 0.99);
}
