/**
 * Shared pieces of the demo's end-to-end tests: a `test` whose pages fail
 * the test on any console error or warning (unless the test declares the
 * one it provokes, e.g. the browser's own log of a 429), and helpers to
 * open the demo and wait for it.
 */
import { test as base, expect, type BrowserContext, type Page } from '@playwright/test';

interface ConsoleWatch {
  watch(context: BrowserContext): void;
  allow(pattern: RegExp): void;
}

interface DemoFixtures {
  /** Fails the test on console errors and warnings of every watched context. */
  consoleWatch: ConsoleWatch;
  /** Declares console messages a test provokes on purpose (a failed request's log line). */
  allowConsole: (pattern: RegExp) => void;
  /** A new browser context (another device: its own storage), watched like the default one. */
  newDevice: () => Promise<BrowserContext>;
}

export const test = base.extend<DemoFixtures>({
  consoleWatch: [
    async ({ context }, use) => {
      const problems: string[] = [];
      const allowed: RegExp[] = [];
      const watchPage = (page: Page) => {
        page.on('console', (message) => {
          if (message.type() === 'error' || message.type() === 'warning') problems.push(`${message.type()}: ${message.text()}`);
        });
        page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
      };
      const watch = (target: BrowserContext) => {
        target.pages().forEach(watchPage);
        target.on('page', watchPage);
      };
      watch(context);
      await use({ watch, allow: (pattern) => allowed.push(pattern) });
      expect(problems.filter((problem) => !allowed.some((pattern) => pattern.test(problem)))).toEqual([]);
    },
    { auto: true },
  ],
  allowConsole: async ({ consoleWatch }, use) => use((pattern) => consoleWatch.allow(pattern)),
  newDevice: async ({ browser, consoleWatch, baseURL }, use) => {
    const opened: BrowserContext[] = [];
    await use(async () => {
      const device = await browser.newContext(baseURL ? { baseURL } : {});
      consoleWatch.watch(device);
      opened.push(device);
      return device;
    });
    for (const device of opened) await device.close();
  },
});

export { expect };

/** Opens the demo at `path` and waits until it has opened a chat. */
export async function openDemo(page: Page, path = '/'): Promise<void> {
  await page.goto(path);
  await page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
}

/** A user name no other test run uses (the e2e server's data persists between runs). */
export function uniqueUser(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
}

/** Types `text` in the composer and sends it with Enter. */
export async function send(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByLabel('Message', { exact: true }).press('Enter');
}

/** The transcript's messages. */
export function messages(page: Page) {
  return page.getByTestId('transcript').locator(':scope > li');
}
