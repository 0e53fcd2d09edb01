/**
 * The published package works for a consumer that bundles it: a tiny app
 * imports 'tabula-sdk' from the built `dist/` (through the exports map, as an
 * installed package would), Vite builds it, and in Chromium the token
 * counter runs in a real worker emitted by the consumer's build.
 */
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as esbuild } from 'esbuild';
import { build } from 'vite';

const root = fileURLToPath(new URL('../../', import.meta.url));
// Per process: a run beside this one (same checkout) builds its own app.
const app = join(root, `test/.tmp/consumer-${process.pid}`);
const out = join(app, 'dist');
let server: Server;
let url = '';

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json' };

test.beforeAll(async () => {
  test.setTimeout(180_000);
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'pipe' });
  rmSync(app, { recursive: true, force: true });
  mkdirSync(join(app, 'node_modules'), { recursive: true });
  // Installed the way npm links a local package: node_modules/tabula-sdk → the repository.
  symlinkSync(root, join(app, 'node_modules/tabula-sdk'), 'dir');
  writeFileSync(join(app, 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="./main.js"></script>');
  writeFileSync(
    join(app, 'main.js'),
    [
      "import { createTokenCounter, openTabula } from 'tabula-sdk';",
      // Nothing is fetched before the first count: the page reports what it loaded before counting.
      "const loadedBefore = () => performance.getEntriesByType('resource').map((entry) => entry.name).filter((name) => /worker/.test(name));",
      'const run = (worker, encoding) => {',
      '  const counter = createTokenCounter({ worker, encoding });',
      '  return counter.ready.then(async (mode) => ({ mode, encoding, reason: counter.fallbackReason, tokens: await counter.countText("hello world, counted in a worker") }));',
      '};',
      'window.result = (async () => {',
      "  const tabula = await openTabula({ name: 'consumer' });",
      "  const session = await tabula.session('s');",
      "  await session.append({ role: 'user', content: 'hi' });",
      '  await session.messages();',
      '  const before = loadedBefore();',
      "  const counts = await Promise.all([run('dedicated', 'o200k_base'), run('shared', 'o200k_base'), run('dedicated', 'cl100k_base')]);",
      '  const tokens = await session.tokens();',
      '  const after = loadedBefore();',
      '  await tabula.close();',
      '  return { before, after, counts, tokens };',
      '})();',
    ].join('\n'),
  );
  // Default Vite settings on purpose: worker.format stays 'iife', which once inlined every encoding into every worker.
  await build({ root: app, logLevel: 'silent', configFile: false, build: { outDir: out, emptyOutDir: true } });
  // esbuild emits no worker for `new Worker(new URL(…))`: the app bundles the worker entry itself and passes workerUrl.
  const esbuildOut = join(out, 'esbuild');
  mkdirSync(esbuildOut, { recursive: true });
  writeFileSync(join(esbuildOut, 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="./app.js"></script>');
  writeFileSync(
    join(app, 'esbuild-main.js'),
    [
      "import { createTokenCounter } from 'tabula-sdk';",
      "const workerUrl = new URL('./o200k-worker.js', import.meta.url);",
      'const run = (worker) => {',
      '  const counter = createTokenCounter({ worker, workerUrl });',
      '  return counter.ready.then(async (mode) => ({ mode, reason: counter.fallbackReason, tokens: await counter.countText("hello world, counted in a worker") }));',
      '};',
      "window.result = Promise.all([run('dedicated'), run('shared')]);",
    ].join('\n'),
  );
  await esbuild({
    absWorkingDir: app,
    entryPoints: { app: './esbuild-main.js', 'o200k-worker': 'tabula-sdk/token-worker/o200k_base' },
    bundle: true,
    format: 'esm',
    outdir: esbuildOut,
    logLevel: 'silent',
  });
  server = createServer((req, res) => {
    const pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const path = join(out, pathname.endsWith('/') ? `${pathname}index.html` : pathname);
    readFile(path).then(
      (body) => {
        res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' });
        res.end(body);
      },
      () => {
        res.writeHead(404);
        res.end();
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

test.afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  rmSync(app, { recursive: true, force: true });
});

/** What an emitted worker file holds: its size and which encodings (each encoding's rank table has its own first tokens). */
function workerFiles(): { file: string; bytes: number }[] {
  return readdirSync(join(out, 'assets'))
    .filter((file) => /worker.*\.js$/.test(file))
    .map((file) => ({ file, bytes: statSync(join(out, 'assets', file)).size }));
}

test('with default Vite settings each emitted token worker holds exactly one encoding (issue 9 item 4)', () => {
  const workers = workerFiles();
  const o200kWorkers = workers.filter((w) => w.file.startsWith('o200k-worker'));
  const cl100kWorkers = workers.filter((w) => w.file.startsWith('cl100k-worker'));
  expect(o200kWorkers, `worker files: ${JSON.stringify(workers)}`).toHaveLength(1);
  expect(cl100kWorkers, `worker files: ${JSON.stringify(workers)}`).toHaveLength(1);
  // Measured: o200k alone 2.04 MB (1.03 MB gzip), cl100k alone 0.98 MB; both together were 2.99 MB in every worker file.
  expect(o200kWorkers[0]!.bytes).toBeLessThan(2.5e6);
  expect(cl100kWorkers[0]!.bytes).toBeLessThan(1.5e6);
  expect(workers.reduce((sum, w) => sum + w.bytes, 0)).toBeLessThan(4e6);
  test.info().annotations.push({ type: 'worker files (bytes)', description: JSON.stringify(workers) });
});

test('a Vite app built against dist/ counts tokens in its own emitted workers (dedicated and shared), and fetched none before the first count (issue 9 item 5)', async ({ page }) => {
  await page.goto(url);
  const result = await page.evaluate(() => (window as unknown as { result: Promise<{ before: string[]; after: string[]; counts: unknown[]; tokens: number }> }).result);
  expect(result.before).toEqual([]);
  // The same observation sees the worker scripts once counting has started, so the empty list above means something.
  expect(result.after.some((name) => /o200k-worker/.test(name)), `loaded: ${result.after.join(', ')}`).toBe(true);
  expect(result.counts).toEqual([
    { mode: 'dedicated', encoding: 'o200k_base', reason: null, tokens: 7 },
    { mode: 'shared', encoding: 'o200k_base', reason: null, tokens: 7 },
    { mode: 'dedicated', encoding: 'cl100k_base', reason: null, tokens: 7 },
  ]);
  expect(result.tokens).toBeGreaterThan(4);
});

test('an esbuild app counts in its own bundle of tabula-sdk/token-worker/o200k_base, passed as workerUrl (issue 9 item 4)', async ({ page }) => {
  await page.goto(`${url}esbuild/`);
  const results = await page.evaluate(() => (window as unknown as { result: Promise<unknown[]> }).result);
  expect(results).toEqual([
    { mode: 'dedicated', reason: null, tokens: 7 },
    { mode: 'shared', reason: null, tokens: 7 },
  ]);
});
