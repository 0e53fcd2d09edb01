// @ts-check
/**
 * Where the tests find Chromium and how they launch it. One place for the
 * Vitest browser project, the Playwright e2e config and the benchmarks.
 *
 * Browsers cannot be downloaded on our machines, so we use the system
 * Chromium (Debian's `chromium` package) and never Playwright's own build.
 */
import { existsSync } from 'node:fs';

/** Default location of Debian's Chromium; `CHROMIUM_PATH` overrides it. */
export const DEFAULT_CHROMIUM_PATH = '/usr/bin/chromium';

/** @returns {string} the Chromium executable the tests will launch */
export function chromiumPath() {
  return process.env.CHROMIUM_PATH || DEFAULT_CHROMIUM_PATH;
}

/**
 * Flags for a headless Chromium on a machine with no network but loopback.
 * Without the background-networking flags Chromium keeps dialling Google's
 * hosts, and every refused connection shows up as noise in the logs.
 */
export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Launch options shared by every Playwright-driven Chromium we start. */
export function chromiumLaunchOptions() {
  return { executablePath: chromiumPath(), args: [...chromiumArgs] };
}

/** @returns {string | null} a message telling how to get Chromium, or null when it is there */
export function missingChromiumMessage() {
  const path = chromiumPath();
  if (existsSync(path)) return null;
  const where = process.env.CHROMIUM_PATH
    ? `CHROMIUM_PATH points to ${path}, which does not exist.`
    : `No Chromium at ${DEFAULT_CHROMIUM_PATH}.`;
  return [
    `${where} The browser and e2e tests need a real Chromium.`,
    'Install Debian\'s Chromium:',
    '  sudo apt-get update && sudo apt-get install -y chromium',
    'or point CHROMIUM_PATH at an existing Chromium or Chrome binary:',
    '  CHROMIUM_PATH=/path/to/chrome npm test',
    '(`npx playwright install` cannot download browsers on machines without internet access.)',
  ].join('\n');
}
