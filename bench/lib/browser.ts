/**
 * Runs a benchmark page in the system Chromium: serves the repository with
 * Vite on a free loopback port, opens the page, and hands back the page
 * and a cleanup function.
 */
import { chromium, type Browser, type BrowserContext, type Page } from '@playwright/test';
import { fileURLToPath } from 'node:url';
import { createServer, type ViteDevServer } from 'vite';
import { chromiumLaunchOptions, missingChromiumMessage } from '../../scripts/chromium.mjs';

/** Calls `window.bench[method](...args)` in a benchmark page and returns its result. */
export function callPage<T>(page: Page, method: string, ...args: unknown[]): Promise<T> {
  return page.evaluate(
    ([m, a]) => (window as unknown as { bench: Record<string, (...x: unknown[]) => unknown> }).bench[m]!(...a),
    [method, args] as const,
  ) as Promise<T>;
}

export interface BenchBrowser {
  readonly browser: Browser;
  readonly context: BrowserContext;
  readonly baseUrl: string;
  /** Opens `path` (e.g. '/bench/pages/sessions.html') and waits for `window.benchReady`. */
  open(path: string): Promise<Page>;
  close(): Promise<void>;
}

/**
 * Serves the repository with Vite on a free loopback port. `optimizeDeps`
 * pre-bundles the named packages (a page that imports many peers would
 * otherwise reload while Vite discovers them); `allow` lists directories
 * outside the repository that pages may import from (as /@fs/…).
 */
export async function serveRepository(options: { optimizeDeps?: string[]; allow?: string[] } = {}): Promise<{ server: ViteDevServer; url: string }> {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const server: ViteDevServer = await createServer({
    configFile: false,
    root,
    logLevel: 'error',
    // Cross-origin isolation gives performance.now() 5 µs resolution instead of 100 µs.
    server: {
      host: '127.0.0.1',
      port: 0,
      headers: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' },
      // A benchmark must not reload its pages when a source file changes under it.
      hmr: false,
      watch: { ignored: ['**/*'] },
      // Directories outside the repository the pages may load (a baseline checkout's src).
      ...(options.allow ? { fs: { allow: [root, ...options.allow] } } : {}),
    },
    ...(options.optimizeDeps ? { optimizeDeps: { include: options.optimizeDeps } } : {}),
  });
  await server.listen();
  const address = server.httpServer?.address();
  if (!address || typeof address === 'string') throw new Error('Vite did not report a port');
  return { server, url: `http://127.0.0.1:${address.port}` };
}

/** Opens `url` in a new page of `context` and waits for `window.benchReady`. */
export async function openBenchPage(context: BrowserContext, url: string, timeoutMs = 60_000): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (error) => console.error(`[page error] ${error.message}`));
  await page.goto(url);
  await page.waitForFunction(() => (window as unknown as { benchReady?: boolean }).benchReady === true, undefined, { timeout: timeoutMs });
  return page;
}

export async function startBenchBrowser(): Promise<BenchBrowser> {
  const missing = missingChromiumMessage();
  if (missing) throw new Error(missing);
  const { server, url: baseUrl } = await serveRepository();
  const browser = await chromium.launch(chromiumLaunchOptions());
  const context = await browser.newContext();
  return {
    browser,
    context,
    baseUrl,
    open: (path) => openBenchPage(context, `${baseUrl}${path}`),
    async close() {
      await context.close();
      await browser.close();
      await server.close();
    },
  };
}
