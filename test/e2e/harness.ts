import type { Page } from '@playwright/test';

/** Opens the harness page, which exposes `window.tabula`. */
export async function openHarness(page: Page): Promise<void> {
  await page.goto('/harness.html');
  await page.waitForFunction(() => window.harnessReady === true);
}

/** A database name no other test uses. */
export function uniqueDbName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
