import { AxeBuilder } from '@axe-core/playwright';
import type { Page } from '@playwright/test';
import { expect, messages, openDemo, send, test } from './demo-fixtures.js';

async function seriousViolations(page: Page, name: string): Promise<string[]> {
  const results = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  return results.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${name}: ${violation.id} (${violation.impact}) at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`);
}

test('axe finds no serious or critical violations on the chat, the dialogs and at 400 px', async ({ page }) => {
  await openDemo(page);
  await send(page, 'todo: check contrast');
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  const found = await seriousViolations(page, 'chat');

  await page.getByTestId('open-settings').click();
  found.push(...(await seriousViolations(page, 'model settings')));
  await page.getByRole('button', { name: 'Cancel' }).click();

  await page.getByTestId('delete').click();
  found.push(...(await seriousViolations(page, 'delete dialog')));
  await page.getByRole('button', { name: 'Cancel' }).click();

  await page.setViewportSize({ width: 400, height: 800 });
  found.push(...(await seriousViolations(page, '400 px')));
  // Nothing spills sideways at 400 px: the page never needs horizontal scrolling.
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(400);
  expect(found).toEqual([]);
});
