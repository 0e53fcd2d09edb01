// @ts-check
/**
 * Bundle-size budgets of the published entry points, measured the way an app
 * would pay for them: esbuild bundles a one-line import of the built `dist/`
 * (resolved through the exports map, as an installed package is), minified,
 * tree-shaken, then gzipped. Run after `npm run build`; exits 1 over budget.
 *
 * What is counted: Tabula's code and its own dependencies (zod, comlink,
 * lib0, y-indexeddb, gpt-tokenizer's code). What is not:
 * - the tokenizer's encodings (`gpt-tokenizer/…/bpeRanks/*`, megabytes of
 *   rank tables loaded by the token worker, priced separately);
 * - the peer dependencies (yjs, y-protocols, dexie): the app installs them
 *   and shares one copy with Tabula. Their share is printed next to the
 *   budgeted figure, so the total an app ships is on screen too.
 *
 * The root entry also checks what a page loads at start: bundled with code
 * splitting, the chunks its entry imports statically (peers included) must
 * hold none of the packages Tabula loads only on first use (`LAZY`: Yjs and
 * the blackboard's helpers when a board is opened, Comlink when tokens are
 * counted). Their size at start is printed as a column of its own.
 */
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** Peer dependencies: the app's own copies, not Tabula's weight. */
export const PEERS = ['yjs', 'y-protocols', 'dexie'];

/** Packages loaded by a dynamic import on first use (a blackboard, a token count), never at start. */
export const LAZY = ['yjs', 'y-protocols', 'y-indexeddb', 'lib0', 'comlink'];

/** @typedef {{ name: string, code: string, budgetBytes: number, lazy?: readonly string[] }} Entry */

/** @type {readonly Entry[]} */
export const ENTRIES = [
  // Budgets: the size measured when the schemas moved to zod/mini (12.5 and 54.2 KB), plus a little room;
  // openTabula's then +0.25 KB for schema v4's stream marker (its upgrade, row check and row builder: 211 bytes),
  // then +1 KB for the open path (1,012 bytes: the hand-written message row check 674, the native message read in
  // session()'s transaction and the set-up during the open 338), which took a new instance's open + last 50 of a
  // 100k-message chat from 1.62× to 1.39× raw Dexie (2.70 → 2.33 ms, medians of one run, bench/peers.bench.ts),
  // then +0.55 KB for the native append (766 bytes over 58,406: the requests interface and its native
  // transaction about 600, plainEqual for the known-row check about 150; 156 reclaimed by reusing cloneJson and shorter
  // errors), which took one append from 1.70× to 1.21–1.24× raw Dexie (bench/append-floor.bench.ts),
  // then +0.1 KB for two lock fixes (run({ wait: false, signal }) and a foreign signal both failed on Web Locks),
  // then +8 KB for sync a user can trust (issues 25 and 26, 58.0 → 64.9 KB measured): the board update rule both
  // ends share (about 3.5 KB: the bounded reader of Yjs's update format, so a tab refuses exactly what the server
  // refuses), per-user sync state and adopt() (about 1.5 KB), the convergence rules that report replaced saves and
  // dropped work and bind handles to their life (about 1.5 KB), and the client's handling of expired streams and
  // retry-later answers; then +1 KB for the clock and size rules of issue 26 (corrected clocks, server epochs,
  // op size limits and parked items; measured 66.2 KB); then +1.25 KB for checkpoints split into ops under the size
  // limit (issue 26: 68,603 → 69,620 bytes, 69,637 on the main it merges into; the part op's schema and rule, the
  // split, restores waiting for a part), then +1.75 KB for the board keys a delete drops (issue 26, item 12:
  // the delete's board state vector, read from the stored board without loading Yjs, and the leases bound to
  // their life; measured 69.4 KB with both).
  { name: "import { WorkingContext } from 'tabula-sdk/core'", code: "export { WorkingContext } from 'tabula-sdk/core';", budgetBytes: 14 * 1024 },
  { name: "import { openTabula } from 'tabula-sdk'", code: "export { openTabula } from 'tabula-sdk';", budgetBytes: 70 * 1024, lazy: LAZY },
];

/**
 * @typedef {object} Measurement
 * @property {string} name the import measured
 * @property {number} budgetBytes gzip budget of `gzipBytes`
 * @property {number} gzipBytes Tabula + its own dependencies, gzip, peers and encodings excluded
 * @property {number} totalGzipBytes the same import with the peers bundled in too
 * @property {number} startGzipBytes what a page loads at start (code splitting, peers included): the chunks the entry imports statically
 * @property {string[]} eager the entry's `lazy` packages found in those chunks (should be none)
 */

/** esbuild plugin: every encoding table becomes an empty module, so it weighs nothing. */
const withoutEncodings = {
  name: 'without-encodings',
  /** @param {import('esbuild').PluginBuild} pluginBuild */
  setup(pluginBuild) {
    pluginBuild.onLoad({ filter: /[\\/]gpt-tokenizer[\\/].*[\\/]bpeRanks[\\/]/ }, () => ({ contents: 'export default [];', loader: 'js' }));
  },
};

/**
 * Gzipped size of one bundle.
 * @param {string} code the consumer module
 * @param {string} resolveDir where 'tabula-sdk' is resolved from
 * @param {readonly string[]} external packages left out of the bundle
 */
async function gzipSize(code, resolveDir, external) {
  const result = await build({
    stdin: { contents: code, resolveDir, loader: 'js' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    external: [...external],
    plugins: [withoutEncodings],
    logLevel: 'error',
  });
  const [output] = result.outputFiles;
  if (!output) throw new Error(`esbuild produced no output for: ${code}`);
  return gzipSync(output.contents, { level: 9 }).length;
}

/**
 * What a page that imports `code` loads at start: esbuild with code splitting,
 * the entry chunk and the chunks it imports statically (not those behind a
 * dynamic import()), each gzipped; and the packages those chunks hold.
 * @param {string} code the consumer module
 * @param {string} resolveDir where 'tabula-sdk' is resolved from
 * @returns {Promise<{ gzipBytes: number, packages: Set<string> }>}
 */
export async function startupBundle(code, resolveDir) {
  const result = await build({
    entryPoints: ['consumer-entry'],
    bundle: true,
    splitting: true,
    outdir: 'startup-out',
    absWorkingDir: resolveDir,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    metafile: true,
    plugins: [
      withoutEncodings,
      {
        name: 'consumer-entry',
        setup(pluginBuild) {
          pluginBuild.onResolve({ filter: /^consumer-entry$/ }, () => ({ path: 'consumer-entry', namespace: 'consumer' }));
          pluginBuild.onLoad({ filter: /.*/, namespace: 'consumer' }, () => ({ contents: code, resolveDir, loader: 'js' }));
        },
      },
    ],
    logLevel: 'error',
  });
  const outputs = result.metafile.outputs;
  const entry = Object.keys(outputs).find((file) => outputs[file]?.entryPoint !== undefined);
  /** @type {Set<string>} */
  const loaded = new Set();
  /** @param {string} file */
  const visit = (file) => {
    if (loaded.has(file)) return;
    loaded.add(file);
    for (const dep of outputs[file]?.imports ?? []) if (dep.kind === 'import-statement') visit(dep.path);
  };
  if (entry) visit(entry);
  /** @type {Set<string>} */
  const packages = new Set();
  let gzipBytes = 0;
  for (const file of loaded) {
    for (const input of Object.keys(outputs[file]?.inputs ?? {})) {
      const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
      if (match?.[1]) packages.add(match[1]);
    }
    const output = result.outputFiles.find((out) => out.path.endsWith(file.slice(file.lastIndexOf('/'))));
    if (output) gzipBytes += gzipSync(output.contents, { level: 9 }).length;
  }
  return { gzipBytes, packages };
}

/**
 * Measures every entry against the package at `root` (its `dist/` must be built).
 * @param {string} root directory of the package
 * @returns {Promise<Measurement[]>}
 */
export async function measureBundles(root) {
  const measurements = [];
  for (const entry of ENTRIES) {
    const start = await startupBundle(entry.code, root);
    measurements.push({
      name: entry.name,
      budgetBytes: entry.budgetBytes,
      gzipBytes: await gzipSize(entry.code, root, PEERS),
      totalGzipBytes: await gzipSize(entry.code, root, []),
      startGzipBytes: start.gzipBytes,
      eager: (entry.lazy ?? []).filter((name) => start.packages.has(name)),
    });
  }
  return measurements;
}

/**
 * The measurements over budget, as messages; empty when all fit.
 * @param {readonly Measurement[]} measurements
 * @returns {string[]}
 */
export function overBudget(measurements) {
  return [
    ...measurements
      .filter((m) => m.gzipBytes > m.budgetBytes)
      .map((m) => `${m.name}: ${kb(m.gzipBytes)} gzip is over its budget of ${kb(m.budgetBytes)}.`),
    ...measurements
      .filter((m) => m.eager.length > 0)
      .map((m) => `${m.name}: a page loads ${m.eager.join(', ')} at start; they must load on first use (a dynamic import()).`),
  ];
}

/** @param {number} bytes */
function kb(bytes) {
  return `${(bytes / 1024).toFixed(1)} KB`;
}

/**
 * The table printed by `npm run check:size`.
 * @param {readonly Measurement[]} measurements
 */
export function formatTable(measurements) {
  const rows = measurements.map((m) => `| \`${m.name}\` | ${kb(m.gzipBytes)} | ${kb(m.budgetBytes)} | ${kb(m.totalGzipBytes)} | ${kb(m.startGzipBytes)} |`);
  return [
    '| import (esbuild, minified, gzip -9) | Tabula + its dependencies | budget | with the peers (yjs, y-protocols, dexie) | loaded at start (code splitting, peers included) |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const measurements = await measureBundles(fileURLToPath(new URL('..', import.meta.url)));
  console.log(formatTable(measurements));
  console.log('Tokenizer encodings are excluded (the token worker loads them).');
  const failures = overBudget(measurements);
  if (failures.length > 0) {
    console.error(failures.join('\n'));
    process.exit(1);
  }
}
