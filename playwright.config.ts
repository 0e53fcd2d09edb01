/**
 * End-to-end tests over the demo, in the system Chromium. The demo is
 * served by Vite on its own port so a running `npm run demo` does not clash.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from '@playwright/test';
import { chromiumLaunchOptions } from './scripts/chromium.mjs';

const port = Number(process.env.E2E_PORT ?? 5199);
/** The built demo, served by `vite preview`; tests read it from E2E_PREVIEW_URL. */
const previewPort = Number(process.env.E2E_PREVIEW_PORT ?? port + 100);
process.env.E2E_PREVIEW_URL = `http://127.0.0.1:${previewPort}`;
// Per port, so that a second run beside this one (other E2E_PORT) neither empties this run's built demo
// nor shares its sync server's database (and so its users' data).
const demoData = `test/.tmp/demo-data-${port}`;
const builtDemo = `../test/.tmp/dist-demo-${previewPort}`;

export default defineConfig({
  testDir: 'test/e2e',
  // Playwright empties its output folder when it starts: one per port, so a run beside this one keeps its own.
  outputDir: `test-results/e2e-${port}`,
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: process.env.CI ? 'line' : 'list',
  timeout: 60_000,
  // Sized for a loaded 2-core machine (another run beside this one): only an event that never comes fails.
  expect: { timeout: 15_000 },
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: chromiumLaunchOptions(),
    trace: 'off',
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }],
  webServer: [
    {
      command: `npx vite --port ${port} --strictPort --host 127.0.0.1`,
      url: `http://127.0.0.1:${port}`,
      reuseExistingServer: !process.env.CI,
      timeout: 60_000,
      // The demo's sync server keeps its SQLite file here, apart from a developer's `npm run demo` data.
      env: { TABULA_DEMO_DATA: demoData, TABULA_VITE_CACHE_DIR: fileURLToPath(new URL(`node_modules/.vite/e2e-${port}`, import.meta.url)) },
    },
    {
      // The built demo (service worker and all) for the offline tests: see test/e2e/demo-offline.spec.ts.
      // outDir is relative to the demo root (vite.config.ts).
      command: `npx vite build --logLevel warn --outDir ${builtDemo} && npx vite preview --outDir ${builtDemo} --port ${previewPort} --strictPort --host 127.0.0.1`,
      url: `http://127.0.0.1:${previewPort}`,
      reuseExistingServer: !process.env.CI,
      timeout: 120_000,
      env: { TABULA_DEMO_DATA: demoData },
    },
  ],
});
