/**
 * One Vite config for the demo (served from `demo/`) and for Vitest's two
 * projects: `unit` in Node, `browser` in the system Chromium.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';
import { chromiumLaunchOptions } from './scripts/chromium.mjs';
import { demoPwa } from './scripts/demo-pwa.js';
import { demoServer } from './scripts/demo-server.js';

const repoRoot = fileURLToPath(new URL('.', import.meta.url));

/**
 * Waits sized for a loaded 2-core machine (another test run beside this one): a test that waits for
 * an event gets the time to see it, so only a missing event fails it. Vitest's defaults (5 s per test,
 * 1 s per `expect.poll`) fail slow but correct runs.
 */
const patience = { testTimeout: 30_000, hookTimeout: 60_000, expect: { poll: { timeout: 20_000 } } };

export default defineConfig({
  root: 'demo',
  // The e2e runs give each dev server its own dependency cache (playwright.config.ts): a server that
  // re-optimizes must not replace the files another run's server is serving.
  ...(process.env.TABULA_VITE_CACHE_DIR ? { cacheDir: process.env.TABULA_VITE_CACHE_DIR } : {}),
  // The sync server and the demo sign-in, on the dev and preview servers (see scripts/demo-server.ts).
  plugins: [demoServer(), demoPwa()],
  server: { port: 5173, strictPort: false },
  build: {
    outDir: '../dist-demo',
    emptyOutDir: true,
    // The tokenizer's rank tables are megabytes by nature; the service worker caches them once.
    chunkSizeWarningLimit: 2500,
    rolldownOptions: {
      // The tokenizer chunks make the plugin-timing report fire on every build; it is noise here.
      checks: { bundlerTimings: false },
      input: { main: fileURLToPath(new URL('demo/index.html', import.meta.url)), playground: fileURLToPath(new URL('demo/playground.html', import.meta.url)) },
    },
  },
  test: {
    root: repoRoot,
    projects: [
      {
        test: {
          name: 'unit',
          root: repoRoot,
          ...patience,
          environment: 'node',
          include: ['test/unit/**/*.test.ts'],
          setupFiles: ['test/unit/setup.ts'],
        },
      },
      {
        test: {
          // The sync server (Node only) against SQLite and one embedded PostgreSQL per run.
          name: 'server',
          root: repoRoot,
          ...patience,
          environment: 'node',
          include: ['test/server/**/*.test.ts'],
          globalSetup: ['test/server/global-setup.ts'],
          // A test that writes to console.error/warn/trace without saying so fails (test/console-guard.ts).
          setupFiles: ['test/console-guard.ts'],
        },
      },
      {
        test: {
          name: 'browser',
          root: repoRoot,
          ...patience,
          // The core and store suites run here too: the core needs nothing Node-only, and the
          // store behaves the same on Chromium's IndexedDB as on fake-indexeddb.
          include: ['test/browser/**/*.test.ts', 'test/unit/core/**/*.test.ts', 'test/unit/store/**/*.test.ts', 'test/unit/blackboard/**/*.test.ts'],
          // Dexie's debug traces off, and the console guard (test/browser/setup.ts).
          setupFiles: ['test/browser/setup.ts'],
          browser: {
            enabled: true,
            headless: true,
            screenshotFailures: false,
            provider: playwright({ launchOptions: chromiumLaunchOptions() }),
            instances: [{ browser: 'chromium' }],
          },
        },
      },
    ],
  },
});
