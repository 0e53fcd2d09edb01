/**
 * `npm run screenshots`: drives the real demo (dev server, sync server and
 * all) in Chromium and writes the README's images to docs/images/. Not a
 * test suite: it runs only when asked, on a fresh data folder.
 */
import { rmSync } from 'node:fs';
import { defineConfig } from '@playwright/test';
import { chromiumLaunchOptions } from '../chromium.mjs';

const port = Number(process.env.SCREENSHOTS_PORT ?? 5398);
const dataDir = 'test/.tmp/screenshots-data';
// Fresh chats and users on every run, so the pictures do not depend on the last one.
rmSync(dataDir, { recursive: true, force: true });

export default defineConfig({
  testDir: '.',
  testMatch: 'shots.ts',
  workers: 1,
  retries: 0,
  reporter: 'list',
  timeout: 120_000,
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: chromiumLaunchOptions(),
    viewport: { width: 1280, height: 800 },
    deviceScaleFactor: 1,
    colorScheme: 'light',
  },
  webServer: {
    command: `npx vite --port ${port} --strictPort --host 127.0.0.1`,
    cwd: '../..',
    url: `http://127.0.0.1:${port}`,
    reuseExistingServer: false,
    timeout: 60_000,
    env: { TABULA_DEMO_DATA: dataDir },
  },
});
