/**
 * Where the time of one append goes, in the system Chromium: Tabula's
 * `session.append()` against raw Dexie's `add` (the floor of the peers
 * benchmark), and against the three requests an append with Tabula's
 * guarantees needs (read the session row, add the message, write the row)
 * made with no other code, once through a Dexie transaction and once through
 * a native IndexedDB transaction. Samples of the four interleave one by one,
 * so a burst of load hits all alike. The goal (issue 15): Tabula ≤ 1.3× raw
 * Dexie. The two floors say how much of the gap is the requests, how much
 * Dexie's transaction around them, and how much Tabula's own code.
 * Environment: FLOOR_ROUNDS (default 300 samples of each), FLOOR_N (messages
 * already in each database, default 1000; another N writes
 * bench/results/append-floor-n<N>.json).
 */
import { callPage, startBenchBrowser } from './lib/browser.js';
import { summarise } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const ROUNDS = Number(process.env.FLOOR_ROUNDS ?? 300);
const N = Number(process.env.FLOOR_N ?? 1000);
const CHUNK = 20;

const env = await startBenchBrowser();
try {
  const page = await env.open('/bench/pages/append-floor.html');
  await callPage(page, 'setUp', N);
  await callPage(page, 'samples', 20); // warm-up
  const all: Record<string, number[]> = {};
  for (let done = 0; done < ROUNDS; done += CHUNK) {
    const chunk = await callPage<Record<string, number[]>>(page, 'samples', Math.min(CHUNK, ROUNDS - done));
    for (const [way, samples] of Object.entries(chunk)) (all[way] ??= []).push(...samples);
  }
  await callPage(page, 'tearDown');
  const floor = summarise(all.dexie ?? []);
  const names: Record<string, string> = {
    tabula: 'Tabula session.append()',
    dexie3: 'its 3 requests, one Dexie transaction, no other code',
    native3: 'its 3 requests, one native IndexedDB transaction',
  };
  const rows: BenchRow[] = Object.entries(names).map(([way, name]) => {
    const s = summarise(all[way] ?? []);
    return {
      case: `append 1 message, N = ${N.toLocaleString('en')}: ${name}`,
      unit: 'ms (median)',
      tabula: s.medianMs,
      baseline: floor.medianMs,
      ratio: s.medianMs / floor.medianMs,
      note: `min ${s.minMs.toFixed(2)} vs ${floor.minMs.toFixed(2)}; p95 ${s.p95Ms.toFixed(2)} vs ${floor.p95Ms.toFixed(2)}`,
    };
  });
  const ratio = (way: string) => summarise(all[way] ?? []).medianMs / floor.medianMs;
  report({
    // One file per N: the default N keeps the name the README cites.
    name: N === 1000 ? 'append-floor' : `append-floor-n${N}`,
    title: `One append, and the floors under it (Chromium, ${ROUNDS} samples of each, interleaved)`,
    baseline: 'raw Dexie: add to a one-store database, then one BroadcastChannel message (the peers benchmark floor)',
    rows,
    goals: [
      `Tabula ${ratio('tabula').toFixed(2)}× raw Dexie (goal ≤ 1.3)`,
      `the same requests: ${ratio('dexie3').toFixed(2)}× through Dexie, ${ratio('native3').toFixed(2)}× natively`,
    ],
  });
} finally {
  await env.close();
}
