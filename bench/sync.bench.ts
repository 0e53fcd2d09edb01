/**
 * Sync through a real `tabula-server` process (SQLite in a temp directory),
 * in the system Chromium, each device a browser context of its own.
 * (a) From `append` on device 1 to the change event on device 2 (median,
 *     p95), beside a raw fetch POST to the same server whose payload
 *     reaches a second client's open `/v1/events` stream, one sample of
 *     each in turn, so that both see the same load. Goal ≤ 3×.
 *     Device 2 applies the items its poke carries; the timeline says how
 *     often it had to pull instead.
 * (b) A new device pulling and applying a 100k-message session (open +
 *     flush), beside raw Dexie bulkAdd of the same rows. Goal ≤ 2×.
 * (c) importSession of the same 100k messages, beside the same raw
 *     bulkAdd. Goal ≤ 2×.
 * SYNC_BENCH_BASELINE=<commit> also runs (a) on that commit's src (a second
 * pair of devices, another user, the same server), one sample of each in
 * turn, and reports the median of the pairs' ratios: a change measured
 * against the code before it under the same load.
 */
import { chromium } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeOp, type Op } from '../src/core/index.js';
import { DEFAULT_SYNC_LIMITS } from '../src/sync/protocol.js';
import { chromiumLaunchOptions, missingChromiumMessage } from '../scripts/chromium.mjs';
import { serverProcess, tokenFor } from '../test/e2e/sync-server.js';
import { callPage, openBenchPage, serveRepository } from './lib/browser.js';
import { summarise } from './lib/measure.js';
import { report, type BenchRow } from './lib/report.js';

const PORT = Number(process.env.SYNC_BENCH_PORT ?? 8807);
const LATENCY_RUNS = 30;
const LATENCY_WARMUP = 3;
/** The leaders' poll interval; device 2 learns of a change from /v1/events long before it. */
const POLL_MS = 1000;
/** Messages of the long session; SYNC_BENCH_MESSAGES=1000 for a quick run. */
const HISTORY = Number(process.env.SYNC_BENCH_MESSAGES ?? 100_000);
const HISTORY_RUNS = 3;
/** A commit whose src runs case (a) beside this checkout's (see the module comment). */
const BASELINE = process.env.SYNC_BENCH_BASELINE;

interface PageBench {
  openDevice(options: { name: string; userId: string; url: string; token: string; pollIntervalMs?: number; src?: string }): Promise<void>;
  armRemote(): void;
  arrival(): Promise<number>;
  appendNow(content: string): Promise<{ at: number; committed: number }>;
  requestsSince(since: number): { path: string; start: number; end: number }[];
  openEvents(url: string, token: string): Promise<void>;
  armPoke(): void;
  pokeArrival(): Promise<number>;
  rawPush(url: string, token: string, userId: string): Promise<number>;
  pullFresh(options: { name: string; userId: string; url: string; token: string; sessionId: string }): Promise<{ ms: number; messages: number }>;
  exportSession(name: string, userId: string, sessionId: string): Promise<number>;
  importFresh(name: string, userId: string): Promise<number>;
  rawBulkAdd(fromName: string, toName: string): Promise<number>;
  pullBreakdown(url: string, token: string): Promise<{ pages: number; networkMs: number; parseMs: number; validateMs: number }>;
  usesEvents(): boolean;
  deleteDb(name: string): Promise<void>;
}

/** The median of samples in ms. */
const p0 = (samples: readonly number[]): number => summarise(samples).medianMs;

/**
 * Extracts `commit`'s src under test/.tmp (inside the repository, so that Vite serves it and its imports
 * resolve to this node_modules); returns its URL path.
 */
function baselineSrc(commit: string): string {
  const root = fileURLToPath(new URL('../', import.meta.url));
  const relative = `test/.tmp/sync-baseline-${commit.replace(/[^\w.-]/g, '_')}`;
  const dir = join(root, relative);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const archive = execFileSync('git', ['archive', '--format=tar', commit, 'src'], { cwd: root, maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  return `/${relative}/src`;
}

const missing = missingChromiumMessage();
if (missing) throw new Error(missing);
const { server: vite, url: base } = await serveRepository();
const browser = await chromium.launch(chromiumLaunchOptions());
const server = serverProcess({ port: PORT, origin: base });
const run = Date.now().toString(36);

/** Pushes a session of `n` messages for `userId` straight to the server, as one client would. */
async function seedHistory(userId: string, token: string, sessionId: string, n: number): Promise<void> {
  const clientId = 'benchseed';
  const wall = Date.now() - n;
  const order = (i: number): string => `${String(wall + i).padStart(15, '0')}.000000.${clientId}`;
  const ops: Op[] = [makeOp('session.create', { id: randomUUID(), userId, sessionId, order: order(0), body: { createdAt: wall, forkOf: null } })];
  for (let i = 1; i <= n; i++) {
    const id = randomUUID();
    const content =
      i % 2 === 0
        ? `Question ${i}: could you compare option ${i % 7} with option ${(i + 3) % 7}?`
        : `Answer ${i}: option ${i % 7} is cheaper, but option ${(i + 3) % 7} is faster to set up and easier to maintain.`;
    ops.push(makeOp('message.append', { id: randomUUID(), userId, sessionId, order: order(i), body: { id, createdAt: wall + i, status: 'complete', message: { role: i % 2 ? 'assistant' : 'user', content } } }));
  }
  for (let start = 0; start < ops.length; start += DEFAULT_SYNC_LIMITS.maxPushItems) {
    const items = ops.slice(start, start + DEFAULT_SYNC_LIMITS.maxPushItems).map((op, k) => ({ seq: start + k + 1, op }));
    const response = await fetch(`${server.url}/v1/push`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ clientId, items }),
    });
    if (!response.ok) throw new Error(`seeding: HTTP ${response.status} ${await response.text()}`);
  }
}

try {
  await server.start();
  const userId = `bench-${run}`;
  const token = await tokenFor(userId);
  const rawUser = `bench-raw-${run}`;
  const rawToken = await tokenFor(rawUser);
  const [c1, c2] = [await browser.newContext(), await browser.newContext()];
  const [p1, p2] = [await openBenchPage(c1, `${base}/bench/pages/sync.html`), await openBenchPage(c2, `${base}/bench/pages/sync.html`)];
  const call = <K extends keyof PageBench>(page: typeof p1, method: K, ...args: Parameters<PageBench[K]>) =>
    callPage<Awaited<ReturnType<PageBench[K]>>>(page, method, ...args);
  const rows: BenchRow[] = [];

  // (a) latency, device 1 → server → device 2.
  await call(p1, 'openDevice', { name: `bench-sync-d1-${run}`, userId, url: server.url, token, pollIntervalMs: POLL_MS });
  await call(p2, 'openDevice', { name: `bench-sync-d2-${run}`, userId, url: server.url, token, pollIntervalMs: POLL_MS });
  const ours: number[] = [];
  // The baseline commit's pair: another user, so that neither pair gets the other's pokes.
  const before = BASELINE ? { src: baselineSrc(BASELINE), user: `bench-before-${run}`, samples: [] as number[], pairs: [] as number[] } : null;
  const [p3, p4] = before ? [await openBenchPage(await browser.newContext(), `${base}/bench/pages/sync.html`), await openBenchPage(await browser.newContext(), `${base}/bench/pages/sync.html`)] : [null, null];
  if (before && p3 && p4) {
    const beforeToken = await tokenFor(before.user);
    await call(p3, 'openDevice', { name: `bench-sync-d3-${run}`, userId: before.user, url: server.url, token: beforeToken, pollIntervalMs: POLL_MS, src: before.src });
    await call(p4, 'openDevice', { name: `bench-sync-d4-${run}`, userId: before.user, url: server.url, token: beforeToken, pollIntervalMs: POLL_MS, src: before.src });
  }
  /** One sample of the baseline pair: ms from append on p3 to the change event on p4. */
  const beforeSample = async (i: number): Promise<number> => {
    await call(p4!, 'armRemote');
    const { at } = await call(p3!, 'appendNow', `latency ${i}`);
    return (await call(p4!, 'arrival')) - at;
  };
  // Where the time goes, each phase as ms after the append call, from the two devices' request logs.
  // Device 2 takes a small push's items from its poke; it pulls only when they do not continue its cursor.
  const PHASES = ['committed locally', 'device 1 push sent', 'push answered', 'change event'] as const;
  const phases = new Map<string, number[]>(PHASES.map((name) => [name, []]));
  let pulledRuns = 0;
  const viaEvents = await call(p2, 'usesEvents');
  await call(p2, 'openEvents', server.url, rawToken);
  const raw: number[] = [];
  /** One sample of this checkout: append on device 1 → change event on device 2, with its timeline. */
  const oursSample = async (i: number): Promise<number> => {
    await call(p2, 'armRemote');
    const { at: sent, committed } = await call(p1, 'appendNow', `latency ${i}`);
    const got = await call(p2, 'arrival');
    if (i < LATENCY_WARMUP) return got - sent;
    const pushed = (await call(p1, 'requestsSince', sent)).find((entry) => entry.path === '/v1/push');
    if ((await call(p2, 'requestsSince', sent)).some((entry) => entry.path === '/v1/pull' && entry.start < got)) pulledRuns++;
    if (pushed) {
      const at = [committed, pushed.start, pushed.end, got];
      PHASES.forEach((name, k) => phases.get(name)!.push(at[k]! - sent));
    }
    return got - sent;
  };
  /** One sample of the raw baseline: a fetch POST on device 1 → the poke on device 2's raw stream. */
  const rawSample = async (): Promise<number> => {
    await call(p2, 'armPoke');
    const sent = await call(p1, 'rawPush', server.url, rawToken, rawUser);
    return (await call(p2, 'pokeArrival')) - sent;
  };
  // Each round takes one sample of each, in an order that rotates, back to back: the machine's load
  // (other processes come and go) weighs on all of them alike, and the ratios compare like with like.
  const samplers = [oursSample, rawSample, ...(before ? [beforeSample] : [])];
  const rawPairs: number[] = [];
  for (let i = 0; i < LATENCY_WARMUP + LATENCY_RUNS; i++) {
    const got = new Map<(i: number) => Promise<number>, number>();
    for (let k = 0; k < samplers.length; k++) {
      const sampler = samplers[(i + k) % samplers.length]!;
      got.set(sampler, await sampler(i));
    }
    if (i < LATENCY_WARMUP) continue;
    const [mine, baseline] = [got.get(oursSample)!, got.get(rawSample)!];
    ours.push(mine);
    raw.push(baseline);
    rawPairs.push(mine / baseline);
    if (before) {
      const old = got.get(beforeSample)!;
      before.samples.push(old);
      before.pairs.push(mine / old);
    }
  }
  const timeline = `${PHASES.map((name) => `${name} ${p0(phases.get(name)!).toFixed(1)}`).join(' → ')}; device 2 pulled before the change in ${pulledRuns} of ${LATENCY_RUNS} runs`;
  console.log(`latency timeline (medians, ms after append()): ${timeline}`);
  const o = summarise(ours);
  const r = summarise(raw);
  rows.push({
    case: 'append on device 1 → change event on device 2',
    unit: 'ms (median)',
    tabula: o.medianMs,
    baseline: r.medianMs,
    ratio: o.medianMs / r.medianMs,
    note: `samples interleaved with the baseline's, median of the ${rawPairs.length} rounds' ratios ${p0(rawPairs).toFixed(2)}; p95 ${o.p95Ms.toFixed(1)} vs ${r.p95Ms.toFixed(1)}; device 2 ${viaEvents ? 'listens to /v1/events' : `polls every ${POLL_MS} ms (no /v1/events client)`}. Medians after append(): ${timeline}`,
  });
  console.log(
    `latency: tabula median ${o.medianMs.toFixed(1)} ms (p95 ${o.p95Ms.toFixed(1)}), raw POST → poke ${r.medianMs.toFixed(1)} ms (p95 ${r.p95Ms.toFixed(1)}); ` +
      `ratio of medians ${(o.medianMs / r.medianMs).toFixed(2)}, median of the rounds' ratios ${p0(rawPairs).toFixed(2)}`,
  );
  if (before) {
    const old = summarise(before.samples);
    const pairRatio = summarise(before.pairs).medianMs;
    rows.push({
      case: `append → change event, this checkout vs ${BASELINE}`,
      unit: 'ms (median)',
      tabula: o.medianMs,
      baseline: old.medianMs,
      ratio: pairRatio,
      note: `ratio = median of the ${before.pairs.length} rounds' ratios; p95 ${o.p95Ms.toFixed(1)} vs ${old.p95Ms.toFixed(1)}; the same server for both`,
    });
    console.log(`latency: this checkout ${o.medianMs.toFixed(1)} ms, ${BASELINE} ${old.medianMs.toFixed(1)} ms; median of pair ratios ${pairRatio.toFixed(3)}`);
    await p3?.context().close();
    await p4?.context().close();
  }
  await c1.close();

  // (b) a new device pulls a 100k-message session; (c) importSession of it. Both beside raw bulkAdd.
  const historyUser = `bench-history-${run}`;
  const historyToken = await tokenFor(historyUser);
  const seedStart = performance.now();
  await seedHistory(historyUser, historyToken, 'long', HISTORY);
  console.log(`seeded ${HISTORY.toLocaleString('en')} messages on the server in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);
  const pulls: number[] = [];
  const imports: number[] = [];
  const bulk: number[] = [];
  const kept = `bench-sync-pulled-${run}`;
  for (let i = 0; i < HISTORY_RUNS; i++) {
    const name = i === 0 ? kept : `bench-sync-pull-${run}-${i}`;
    const pulled = await call(p2, 'pullFresh', { name, userId: historyUser, url: server.url, token: historyToken, sessionId: 'long' });
    if (pulled.messages !== HISTORY) throw new Error(`the new device holds ${pulled.messages} messages, expected ${HISTORY}`);
    pulls.push(pulled.ms);
    bulk.push(await call(p2, 'rawBulkAdd', kept, `bench-sync-raw-${run}-${i}`));
    await call(p2, 'deleteDb', `bench-sync-raw-${run}-${i}`);
    if (i > 0) await call(p2, 'deleteDb', name);
    console.log(`pull ${i + 1}: ${pulled.ms.toFixed(0)} ms; raw bulkAdd ${bulk[i]!.toFixed(0)} ms`);
  }
  const parts = await call(p2, 'pullBreakdown', server.url, historyToken);
  const applyMs = p0(pulls) - parts.networkMs - parts.parseMs - parts.validateMs;
  console.log(
    `where a pull's time goes (${parts.pages} pages): fetch + read ${parts.networkMs.toFixed(0)} ms, JSON.parse ${parts.parseMs.toFixed(0)} ms, ` +
      `zod validation ${parts.validateMs.toFixed(0)} ms, the rest (open, applyOps, bulkAdd, cursor) ≈ ${applyMs.toFixed(0)} ms of the median pull`,
  );
  await call(p2, 'exportSession', kept, historyUser, 'long');
  for (let i = 0; i < HISTORY_RUNS; i++) {
    const name = `bench-sync-import-${run}-${i}`;
    imports.push(await call(p2, 'importFresh', name, historyUser));
    bulk.push(await call(p2, 'rawBulkAdd', kept, `bench-sync-raw2-${run}-${i}`));
    await call(p2, 'deleteDb', `bench-sync-raw2-${run}-${i}`);
    await call(p2, 'deleteDb', name);
    console.log(`import ${i + 1}: ${imports[i]!.toFixed(0)} ms; raw bulkAdd ${bulk[HISTORY_RUNS + i]!.toFixed(0)} ms`);
  }
  await call(p2, 'deleteDb', kept);
  const p = summarise(pulls);
  const im = summarise(imports);
  const b = summarise(bulk);
  rows.push({
    case: `new device pulls a ${HISTORY.toLocaleString('en')}-message session`,
    unit: 'ms (median)',
    tabula: p.medianMs,
    baseline: b.medianMs,
    ratio: p.medianMs / b.medianMs,
    note:
      `${HISTORY_RUNS} runs, ${parts.pages} pages; open + flush(), network included. Of one pull: fetch + read ${parts.networkMs.toFixed(0)} ms, ` +
      `JSON.parse ${parts.parseMs.toFixed(0)} ms, zod ${parts.validateMs.toFixed(0)} ms, the rest (open, applyOps, bulkAdd, cursor) ≈ ${applyMs.toFixed(0)} ms`,
  });
  rows.push({
    case: `importSession of ${HISTORY.toLocaleString('en')} messages`,
    unit: 'ms (median)',
    tabula: im.medianMs,
    baseline: b.medianMs,
    ratio: im.medianMs / b.medianMs,
    note: `${HISTORY_RUNS} runs`,
  });

  report({
    name: 'sync',
    title: 'Sync through a local tabula-server (SQLite), Chromium',
    baseline: 'latency: raw fetch POST /v1/push → poke on another client\'s open /v1/events stream; history: raw Dexie bulkAdd of the same message rows (same indexes), one transaction',
    rows,
    goals: [
      `append → remote change event: ${(o.medianMs / r.medianMs).toFixed(2)}× the raw POST → poke (goal ≤ 3×)`,
      `new device pulls 100k: ${(p.medianMs / b.medianMs).toFixed(2)}× raw bulkAdd (goal ≤ 2×)`,
      `importSession 100k: ${(im.medianMs / b.medianMs).toFixed(2)}× raw bulkAdd (goal ≤ 2×)`,
    ],
  });
  await c2.close();
} finally {
  await browser.close();
  await vite.close();
  await server.dispose();
}
