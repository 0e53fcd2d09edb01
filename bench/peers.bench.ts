/**
 * Tabula against what users would pick instead, in one Chromium run:
 * RxDB 17.6 (Dexie storage, index on [sessionId, order]), TinyBase 10
 * (IndexedDB persister) and raw Dexie (the floor). Each system runs in its
 * own origin (its own Vite server port) on an on-disk profile; rounds
 * interleave the systems so drift on a shared machine hits all alike.
 * Cases: append 1 message at N = 1k/10k/100k; a new instance opening a
 * 100k-message chat and reading its last 50; bulk insert of 100k messages
 * into a new chat; append in tab A → event in tab B; JS for what the page
 * used (esbuild, minified, gzip). Writes bench/results/peers.json.
 * Environment: PEERS_BULK_N (default 100000), PEERS_BULK_ROUNDS (default 2),
 * PEERS_BASELINE_SRC (the src directory of another checkout: that Tabula
 * runs as a fifth system, 'tabula-baseline', so a change is measured
 * against what it replaced in the same run), PEERS_CASES (a comma list of
 * bulk, append, xtab, open, js; default all: `PEERS_CASES=open` measures
 * one case in minutes instead of the full run's hour; the 100k chat the
 * open case reads is still written by one bulk round), PEERS_SYSTEMS (a
 * comma list of the systems to run; default all), PEERS_OPEN_ROUNDS (default
 * 10 rounds of 2 opens per system). A partial run writes
 * bench/results/peers-<cases>.json, not peers.json.
 */
import { chromium, type BrowserContext, type Page } from '@playwright/test';
import { build } from 'esbuild';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromiumLaunchOptions, missingChromiumMessage } from '../scripts/chromium.mjs';
import { callPage, openBenchPage, serveRepository } from './lib/browser.js';
import { summarise, type Sample } from './lib/measure.js';
import { writeResult } from './lib/report.js';

const BASELINE_SRC = process.env.PEERS_BASELINE_SRC ? resolve(process.env.PEERS_BASELINE_SRC) : undefined;
const ALL_SYSTEMS = ['tabula', 'rxdb', 'tinybase', 'dexie', 'tabula-baseline'] as const;
type System = (typeof ALL_SYSTEMS)[number];
const listed = (value: string | undefined, all: readonly string[], what: string): Set<string> | null => {
  if (!value) return null;
  const names = value.split(',').map((item) => item.trim()).filter((item) => item !== '');
  const unknown = names.filter((item) => !all.includes(item));
  if (unknown.length > 0) throw new Error(`${what}: unknown ${unknown.join(', ')}; choose from ${all.join(', ')}`);
  return new Set(names);
};
const CASES = ['bulk', 'append', 'xtab', 'open', 'js'] as const;
const chosenCases = listed(process.env.PEERS_CASES, CASES, 'PEERS_CASES');
const runs = (name: (typeof CASES)[number]) => chosenCases === null || chosenCases.has(name);
const chosenSystems = listed(process.env.PEERS_SYSTEMS, ALL_SYSTEMS, 'PEERS_SYSTEMS');
const SYSTEMS: readonly System[] = (BASELINE_SRC ? ALL_SYSTEMS : ALL_SYSTEMS.slice(0, 4)).filter((system) => chosenSystems === null || chosenSystems.has(system));
const isTabula = (system: string) => system === 'tabula' || system === 'tabula-baseline';
const BULK_N = Number(process.env.PEERS_BULK_N ?? 100_000);
// Without the bulk case, one round still writes the 100k chat that the append and open cases use.
const BULK_ROUNDS = runs('bulk') ? Number(process.env.PEERS_BULK_ROUNDS ?? 2) : 1;
const APPEND_SIZES = [1_000, 10_000, BULK_N];
// Many short chunks, not a few long ones: on a loaded machine a burst of load that lands on one system's chunk
// of 15 moved its median by 2× (two runs of the day); chunks of 5, rotated, spread bursts over every system.
const APPEND_CHUNKS = 12;
const APPEND_CHUNK = 5;
const XTAB_RUNS = 30;
const OPEN_ROUNDS = Number(process.env.PEERS_OPEN_ROUNDS ?? 10);
const OPEN_CHUNK = 2;
/** A system whose single sample takes longer than this gets one sample per chunk, not a full chunk. */
const SLOW_MS = 150;

const GUARANTEES: Record<System, string> = {
  tabula: 'durable when the promise resolves (transaction committed); rows validated on write and read (zod; message rows read by a hand-written check that accepts exactly what the zod schema does); cross-tab events by BroadcastChannel after commit',
  rxdb: 'durable when insert resolves (Dexie transaction committed); no validation without a validate plugin (none here); cross-tab events by BroadcastChannel (multiInstance)',
  tinybase: 'in-memory store; durable only when an awaited persister.save() resolves (it rewrites the chat); no validation without a schema; other tabs poll (autoLoad, every 1 s)',
  dexie: 'durable when add resolves; no validation; no cross-tab event of its own: the floor posts one BroadcastChannel message after each add',
  'tabula-baseline': 'the Tabula of PEERS_BASELINE_SRC (before the change measured), same guarantees as tabula',
};

const root = fileURLToPath(new URL('../', import.meta.url));

const serve = () =>
  serveRepository({
    optimizeDeps: ['rxdb', 'rxdb/plugins/storage-dexie', 'tinybase', 'tinybase/persisters/persister-indexed-db', 'dexie', 'yjs', 'zod'],
    ...(BASELINE_SRC ? { allow: [BASELINE_SRC] } : {}),
  });
const openPage = (context: BrowserContext, url: string): Promise<Page> => openBenchPage(context, url, 120_000);

/**
 * JS for what the page used: the system module bundled by esbuild with code
 * splitting, minified; the entry chunk and the chunks it imports statically,
 * each gzipped. Chunks loaded by a dynamic import() the benchmark never
 * triggers (Tabula's tokenizer) are not counted, as the page never loads them.
 */
async function jsKiB(system: System): Promise<number> {
  const baseline = system === 'tabula-baseline' && BASELINE_SRC ? BASELINE_SRC : null;
  const result = await build({
    entryPoints: [join(root, `bench/pages/peers/systems/${baseline ? 'tabula' : system}.ts`)],
    // The baseline is the same page over the other checkout's src.
    plugins: baseline
      ? [{ name: 'baseline-src', setup: (b) => b.onResolve({ filter: /\/src\/index\.js$/ }, () => ({ path: join(baseline, 'index.ts') })) }]
      : [],
    bundle: true,
    splitting: true,
    outdir: join(os.tmpdir(), 'tabula-peers-js'),
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const outputs = result.metafile.outputs;
  const entry = Object.keys(outputs).find((file) => outputs[file]?.entryPoint !== undefined);
  const used = new Set<string>();
  const visit = (file: string) => {
    if (used.has(file)) return;
    used.add(file);
    for (const dep of outputs[file]?.imports ?? []) if (dep.kind === 'import-statement') visit(dep.path);
  };
  if (entry) visit(entry);
  const bytes = result.outputFiles
    .filter((file) => [...used].some((path) => file.path.endsWith(path.replace(/^.*tabula-peers-js/, ''))))
    .reduce((sum, file) => sum + gzipSync(file.contents, { level: 9 }).length, 0);
  return bytes / 1024;
}

/** Runs `task` for each system, in an order rotated by `round`. */
async function interleave(round: number, task: (system: System) => Promise<void>): Promise<void> {
  for (let k = 0; k < SYSTEMS.length; k++) await task(SYSTEMS[(k + round) % SYSTEMS.length] as System);
}

interface Row {
  readonly case: string;
  readonly unit: string;
  readonly higherIsBetter: boolean;
  readonly values: Partial<Record<string, Sample | { value: number }>>;
}

const missing = missingChromiumMessage();
if (missing) throw new Error(missing);
const profile = mkdtempSync(join(os.tmpdir(), 'tabula-peers-'));
const servers = await Promise.all(SYSTEMS.map(() => serve()));
const context = await chromium.launchPersistentContext(profile, { ...chromiumLaunchOptions(), headless: true });
const started = performance.now();
try {
  const url = (system: System) =>
    `${servers[SYSTEMS.indexOf(system)]!.url}/bench/pages/peers/${system}.html${system === 'tabula-baseline' ? `?src=${encodeURIComponent(BASELINE_SRC ?? '')}` : ''}`;
  const tabA = {} as Record<System, Page>;
  const tabB = {} as Record<System, Page>;
  for (const system of SYSTEMS) tabA[system] = await openPage(context, url(system));
  const a = <T>(system: System, method: string, ...args: unknown[]) => callPage<T>(tabA[system], method, ...args);
  const b = <T>(system: System, method: string, ...args: unknown[]) => callPage<T>(tabB[system], method, ...args);
  const rows: Row[] = [];
  const next = new Map<string, number>();
  const take = (system: System, chat: string, count: number) => {
    const key = `${system}/${chat}`;
    const from = next.get(key) ?? 0;
    next.set(key, from + count);
    return from;
  };

  // Bulk: 100k into a new chat. Round 0's chat is also the 100k chat of the later cases.
  const bulk: Record<string, number[]> = {};
  for (let round = 0; round < BULK_ROUNDS; round++) {
    await interleave(round, async (system) => {
      const importRound = async () => {
        const ms = await a<number>(system, 'bulk', `bulk-${round}`, BULK_N);
        (bulk[system] ??= []).push(ms);
        next.set(`${system}/bulk-${round}`, BULK_N);
        console.log(`bulk ${system} round ${round}: ${((BULK_N / ms) * 1000).toFixed(0)} msgs/s`);
      };
      const batchRound = async () => {
        const batch = await a<number>(system, 'bulk', `batch-${round}`, BULK_N, 'bulkAppend');
        (bulk[`${system} (append batch)`] ??= []).push(batch);
        console.log(`bulk ${system} (append batch) round ${round}: ${((BULK_N / batch) * 1000).toFixed(0)} msgs/s`);
      };
      if (!isTabula(system) || !runs('bulk')) return importRound();
      // A bulk write right after another one into the same database was slower here: the same 100k
      // append(batch) twice in a row ran 29% and 40% slower the second time (the browser is still busy
      // with the first one's data). Always second, append(batch) paid that in every round; so
      // Tabula's two bulk paths take turns going first.
      if (round % 2 === 0) {
        await importRound();
        await batchRound();
      } else {
        await batchRound();
        await importRound();
      }
    });
  }
  const rate = (samples: number[]): Sample => {
    const s = summarise(samples.map((ms) => BULK_N / (ms / 1000)));
    return s;
  };
  if (runs('bulk')) rows.push({
    case: `bulk insert ${BULK_N.toLocaleString('en')} into a new chat`,
    unit: 'msgs/s',
    higherIsBetter: true,
    values: Object.fromEntries(Object.entries(bulk).map(([system, samples]) => [system, rate(samples)])),
  });

  // Append 1 message at N. The cross-tab case appends to the 1k chat.
  for (const n of runs('append') ? APPEND_SIZES : runs('xtab') ? [1_000] : []) {
    const chat = n === BULK_N ? 'bulk-0' : `seed-${n}`;
    if (n !== BULK_N) for (const system of SYSTEMS) {
      await a(system, 'bulk', chat, n);
      next.set(`${system}/${chat}`, n);
    }
    if (!runs('append')) continue;
    const samples: Partial<Record<System, number[]>> = {};
    for (const system of SYSTEMS) await a(system, 'append', chat, take(system, chat, 2), 2); // warm-up
    for (let round = 0; round < APPEND_CHUNKS; round++) {
      await interleave(round, async (system) => {
        const list = (samples[system] ??= []);
        const runs = list.length > 0 && Math.min(...list) > SLOW_MS ? 1 : APPEND_CHUNK;
        list.push(...(await a<number[]>(system, 'append', chat, take(system, chat, runs), runs)));
      });
    }
    rows.push({
      case: `append 1 message, N = ${n.toLocaleString('en')}`,
      unit: 'ms',
      higherIsBetter: false,
      values: Object.fromEntries(Object.entries(samples).map(([system, list]) => [system, summarise(list)])),
    });
    console.log(`append N=${n} done`);
  }

  // Append in tab A → event in tab B (same origin, same profile).
  if (runs('xtab')) {
    for (const system of SYSTEMS) {
      tabB[system] = await openPage(context, url(system));
      await b(system, 'watch', 'seed-1000');
    }
    const xtab: Partial<Record<System, number[]>> = {};
    for (let round = 0; round < XTAB_RUNS; round++) {
      await interleave(round, async (system) => {
        await b(system, 'arm');
        const sent = await a<number>(system, 'appendAt', 'seed-1000', take(system, 'seed-1000', 1));
        const seen = await b<number>(system, 'event');
        (xtab[system] ??= []).push(seen - sent);
      });
    }
    rows.push({
      case: 'append in tab A → event in tab B',
      unit: 'ms',
      higherIsBetter: false,
      values: Object.fromEntries(Object.entries(xtab).map(([system, list]) => [system, summarise(list)])),
    });
    console.log('cross-tab done');
    for (const system of SYSTEMS) {
      await b(system, 'close');
      await tabB[system].close();
    }
  }
  for (const system of SYSTEMS) await a(system, 'close');

  // New instance: open + last 50 of the 100k chat. Chromium closes a database's files a few seconds after its
  // last connection closes, and reopening them cost 0.8–1.3 s for a 100k-message database here: with a slow system
  // in the rotation, every other system's first open of a round paid that, and it made half of all samples
  // (chunks of 2) instead of measuring the open path. So each round's first open is recorded apart (row
  // "after idle"), and the measured opens follow it, on files the browser has open, as a page's next open is.
  if (runs('open')) {
    const opens: Partial<Record<System, number[]>> = {};
    const firsts: Partial<Record<System, number[]>> = {};
    for (let round = 0; round < OPEN_ROUNDS; round++) {
      await interleave(round, async (system) => {
        const list = (opens[system] ??= []);
        (firsts[system] ??= []).push(...(await a<number[]>(system, 'openLast', 'bulk-0', 1)));
        const count = list.length > 0 && Math.min(...list) > SLOW_MS ? 1 : OPEN_CHUNK;
        list.push(...(await a<number[]>(system, 'openLast', 'bulk-0', count)));
      });
    }
    rows.push({
      case: `new instance: open + last 50 of ${BULK_N.toLocaleString('en')}`,
      unit: 'ms',
      higherIsBetter: false,
      values: Object.fromEntries(Object.entries(opens).map(([system, list]) => [system, summarise(list)])),
    });
    rows.push({
      case: `new instance after idle (first open of each round; the browser may have closed the files)`,
      unit: 'ms',
      higherIsBetter: false,
      values: Object.fromEntries(Object.entries(firsts).map(([system, list]) => [system, summarise(list)])),
    });
  }

  // JS for what the page used.
  if (runs('js')) {
    const js: Partial<Record<System, { value: number }>> = {};
    for (const system of SYSTEMS) js[system] = { value: await jsKiB(system) };
    rows.push({ case: 'JS for what the page used', unit: 'KiB gzip', higherIsBetter: false, values: js });
  }

  // Print and record.
  const order = ['append 1 message', 'new instance', 'bulk insert', 'append in tab A', 'JS for'];
  rows.sort((x, y) => order.findIndex((p) => x.case.startsWith(p)) - order.findIndex((p) => y.case.startsWith(p)));
  const central = (v: Sample | { value: number } | undefined) => (v === undefined ? NaN : 'value' in v ? v.value : v.medianMs);
  const fmt = (x: number) => (Number.isNaN(x) ? '' : x >= 100 ? x.toFixed(0) : x.toFixed(2));
  const table = rows.map((row) => {
    const base = central(row.values.tabula);
    const line: Record<string, string> = { case: row.case, unit: `${row.unit}${row.unit === 'KiB gzip' ? '' : ' (median / p95)'}` };
    for (const [system, value] of Object.entries(row.values)) {
      const c = central(value);
      const p95 = value && 'p95Ms' in value ? ` / ${fmt(value.p95Ms)}` : '';
      const ratio = system === 'tabula' ? '' : ` (${fmt(row.higherIsBetter ? base / c : c / base)}×)`;
      line[system] = `${fmt(c)}${p95}${ratio}`;
    }
    return line;
  });
  console.log('\nTabula vs RxDB, TinyBase and raw Dexie (Chromium, on-disk profile); (n×) = the system\'s cost ÷ Tabula\'s (time, or inverse rate): above 1, Tabula is ahead');
  console.table(table);

  const med = (caseStart: string, system: string) => central(rows.find((row) => row.case.startsWith(caseStart))?.values[system]);
  const minOf = (caseStart: string, system: string) => {
    const v = rows.find((row) => row.case.startsWith(caseStart))?.values[system];
    return v && 'minMs' in v ? v.minMs : NaN;
  };
  const goalsOf = (t: 'tabula' | 'tabula-baseline') => {
    const who = t === 'tabula' ? 'Tabula' : 'Tabula baseline';
    const lines: string[] = [];
    if (runs('append')) {
      for (const n of APPEND_SIZES) {
        const c = `append 1 message, N = ${n.toLocaleString('en')}`;
        lines.push(`${c}: ${who} ${(med(c, t) / med(c, 'dexie')).toFixed(2)}× raw Dexie (goal ≤ 1.3), ${(med(c, t) / med(c, 'rxdb')).toFixed(2)}× RxDB (goal < 1)`);
      }
    }
    if (runs('open')) {
      lines.push(
        `open + last 50: ${who} ${(med('new instance', t) / med('new instance', 'dexie')).toFixed(2)}× raw Dexie (goal ≤ 1.5); minimums ${(minOf('new instance', t) / minOf('new instance', 'dexie')).toFixed(2)}×`,
      );
    }
    if (runs('bulk')) {
      lines.push(`bulk importSession: ${who} ${(med('bulk insert', t) / med('bulk insert', 'dexie')).toFixed(2)}× raw Dexie bulkAdd (goal ≥ 0.5)`);
      lines.push(`bulk append(batch): ${who} ${(med('bulk insert', `${t} (append batch)`) / med('bulk insert', 'dexie')).toFixed(2)}× raw Dexie bulkAdd (goal ≥ 0.5)`);
    }
    if (runs('xtab')) {
      lines.push(`cross-tab: ${who} ${(med('append in tab A', t) / med('append in tab A', 'rxdb')).toFixed(2)}× RxDB (goal ≤ 1), ${(med('append in tab A', t) / med('append in tab A', 'dexie')).toFixed(2)}× add + BroadcastChannel (goal ≤ 1.3)`);
    }
    if (runs('js')) lines.push(`JS: ${who} ${(med('JS for', t) / med('JS for', 'rxdb')).toFixed(2)}× RxDB (goal ≤ 1)`);
    return lines;
  };
  const goals = goalsOf('tabula');
  const before = BASELINE_SRC ? goalsOf('tabula-baseline') : [];
  for (const goal of [...goals, ...before]) console.log(goal);
  console.log(`total ${((performance.now() - started) / 1000).toFixed(0)} s`);

  // A partial run (PEERS_CASES, PEERS_SYSTEMS) is kept apart from the full run's peers.json.
  const partial = chosenCases !== null || chosenSystems !== null;
  writeResult(partial ? `peers-${CASES.filter(runs).join('-')}` : 'peers', {
    title: 'Tabula vs RxDB 17.6 (Dexie storage), TinyBase 10 (IndexedDB persister) and raw Dexie 4.4.7, Chromium, on-disk profile, each system in its own origin',
    method: `${partial ? `partial run: cases ${CASES.filter(runs).join(', ')}, systems ${SYSTEMS.join(', ')}; ` : ''}rounds interleaved across systems; bulk ${BULK_ROUNDS} rounds of ${BULK_N}; append ${APPEND_CHUNKS}×${APPEND_CHUNK} per N (1 per chunk for a system slower than ${SLOW_MS} ms); cross-tab ${XTAB_RUNS}; open ${OPEN_ROUNDS}×(1 first open, recorded apart, + ${OPEN_CHUNK}) (1 + 1 per round when slow); messages of 209 characters; JS = the system module bundled by esbuild, minified, gzip -9`,
    guarantees: Object.fromEntries(SYSTEMS.map((system) => [system, GUARANTEES[system]])),
    rows,
    goals,
    ...(BASELINE_SRC ? { baseline: { src: BASELINE_SRC, goals: before } } : {}),
  });
} finally {
  await context.close();
  await Promise.all(servers.map(({ server }) => server.close()));
  rmSync(profile, { recursive: true, force: true });
}
