/**
 * The published package works for a consumer that bundles it: a tiny app
 * imports 'tabula-sdk' from the built `dist/` (through the exports map, as an
 * installed package would), Vite builds it, and in Chromium the token
 * counter runs in a real worker emitted by the consumer's build.
 */
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const root = fileURLToPath(new URL('../../', import.meta.url));
const app = join(root, 'test/.tmp/consumer');
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
      "import { createTokenCounter } from 'tabula-sdk';",
      'const run = (worker) => {',
      '  const counter = createTokenCounter({ worker });',
      '  return counter.ready.then(async (mode) => ({ mode, reason: counter.fallbackReason, tokens: await counter.countText("hello world, counted in a worker") }));',
      '};',
      "window.result = Promise.all([run('dedicated'), run('shared')]);",
    ].join('\n'),
  );
  await build({ root: app, logLevel: 'silent', configFile: false, build: { outDir: out, emptyOutDir: true } });
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

test('a Vite app built against dist/ counts tokens in its own emitted workers (dedicated and shared)', async ({ page }) => {
  const assets = readdirSync(join(out, 'assets'));
  expect(assets.some((file) => /^worker-.*\.js$/.test(file)), `worker chunk in ${assets.join(', ')}`).toBe(true);
  expect(assets.some((file) => /^shared-worker-.*\.js$/.test(file)), `shared worker chunk in ${assets.join(', ')}`).toBe(true);
  await page.goto(url);
  const results = await page.evaluate(() => (window as unknown as { result: Promise<{ mode: string; reason: string | null; tokens: number }[]> }).result);
  expect(results).toEqual([
    { mode: 'dedicated', reason: null, tokens: 7 },
    { mode: 'shared', reason: null, tokens: 7 },
  ]);
});
