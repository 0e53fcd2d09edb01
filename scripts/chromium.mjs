// @ts-check
/**
 * Where the tests find Chromium and how they launch it. One place for the
 * Vitest browser project, the Playwright e2e config and the benchmarks.
 *
 * The search order, first match wins:
 * 1. `CHROMIUM_PATH`, when set (and it must exist: a wrong path is an error,
 *    not a reason to quietly test another browser);
 * 2. a system Chromium or Chrome on the PATH or at its usual location
 *    (Debian's `chromium` package is what `.ci/run` installs);
 * 3. Playwright's own Chromium, when `npx playwright install chromium` has
 *    downloaded it (many machines, ours included, cannot download browsers).
 * When none is found, `missingChromiumMessage()` says exactly what to run.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, join } from 'node:path';

/** Executable names of a system Chromium or Chrome, searched on the PATH in this order. */
export const SYSTEM_CHROMIUM_NAMES = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable', 'chrome'];

/** Usual install locations outside the PATH (snap, macOS app bundles). */
export const SYSTEM_CHROMIUM_PATHS = [
  '/usr/bin/chromium',
  '/snap/bin/chromium',
  '/Applications/Chromium.app/Contents/MacOS/Chromium',
  '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
];

/**
 * @typedef {object} ChromiumSearch
 * @property {Readonly<Record<string, string | undefined>>} env the environment (CHROMIUM_PATH, PATH)
 * @property {(path: string) => boolean} exists whether an executable is at a path
 * @property {() => string | undefined} playwrightPath where Playwright's own Chromium would be
 */

/** @typedef {{ path: string, source: 'CHROMIUM_PATH' | 'system' | 'playwright' }} FoundChromium */

/** @type {ChromiumSearch} */
const realSearch = {
  env: process.env,
  exists: existsSync,
  playwrightPath() {
    // Loaded only when no other browser is found: it pulls in all of Playwright.
    try {
      /** @type {unknown} */
      const loaded = createRequire(import.meta.url)('@playwright/test');
      return /** @type {{ chromium: { executablePath(): string } }} */ (loaded).chromium.executablePath();
    } catch {
      return undefined;
    }
  },
};

/**
 * Finds the Chromium to test with.
 * @param {ChromiumSearch} [search] where to look (the real machine by default; tests pass a fake)
 * @returns {FoundChromium | null} null when there is none, or when CHROMIUM_PATH names a missing file
 */
export function findChromium(search = realSearch) {
  const fromEnv = search.env.CHROMIUM_PATH;
  if (fromEnv) return search.exists(fromEnv) ? { path: fromEnv, source: 'CHROMIUM_PATH' } : null;
  const dirs = (search.env.PATH ?? '').split(delimiter).filter(Boolean);
  const candidates = [...SYSTEM_CHROMIUM_NAMES.flatMap((name) => dirs.map((dir) => join(dir, name))), ...SYSTEM_CHROMIUM_PATHS];
  const system = candidates.find((path) => search.exists(path));
  if (system) return { path: system, source: 'system' };
  const bundled = search.playwrightPath();
  if (bundled && search.exists(bundled)) return { path: bundled, source: 'playwright' };
  return null;
}

let found = /** @type {FoundChromium | null | undefined} */ (undefined);

/** @returns {string} the Chromium executable the tests will launch; throws the how-to message when there is none */
export function chromiumPath() {
  found ??= findChromium();
  if (!found) throw new Error(missingChromiumMessage() ?? 'No Chromium found.');
  return found.path;
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

/**
 * Launch options shared by every Playwright-driven Chromium we start. When
 * no Chromium is found the executable is left to Playwright, whose launch
 * then fails; `npm test` has already stopped with the how-to message.
 */
export function chromiumLaunchOptions() {
  found ??= findChromium();
  return found ? { executablePath: found.path, args: [...chromiumArgs] } : { args: [...chromiumArgs] };
}

/**
 * @param {ChromiumSearch} [search] where to look (the real machine by default)
 * @returns {string | null} a message saying exactly how to get Chromium, or null when there is one
 */
export function missingChromiumMessage(search = realSearch) {
  if (findChromium(search)) return null;
  const fromEnv = search.env.CHROMIUM_PATH;
  const where = fromEnv
    ? `CHROMIUM_PATH points to ${fromEnv}, which does not exist.`
    : `No Chromium found: not on the PATH (${SYSTEM_CHROMIUM_NAMES.join(', ')}), not at ${SYSTEM_CHROMIUM_PATHS[0]}, and Playwright's own Chromium is not installed.`;
  return [
    `${where} The browser and e2e tests need a real Chromium. Any one of these will do:`,
    "  sudo apt-get update && sudo apt-get install -y chromium     # Debian/Ubuntu's Chromium",
    '  npx playwright install chromium                              # Playwright\'s build, where downloads work',
    '  CHROMIUM_PATH=/path/to/chrome npm test                       # an existing Chromium or Chrome binary',
  ].join('\n');
}
