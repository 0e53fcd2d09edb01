/**
 * The README's demo images, taken from the running app: a reply streaming,
 * two tabs on one chat, two devices of one user in sync, the token meter,
 * and the offline banner. Each image is the app as a user sees it; nothing
 * is staged beyond typing into it.
 */
import { fileURLToPath } from 'node:url';
import { expect, test, type Page } from '@playwright/test';

const out = (name: string) => fileURLToPath(new URL(`../../docs/images/${name}.png`, import.meta.url));
const ready = (page: Page) => page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
const transcript = (page: Page) => page.getByTestId('transcript').locator(':scope > li');

async function say(page: Page, text: string, wait: 'complete' | 'streaming' = 'complete'): Promise<void> {
  // A turn still running (a tool call between two replies) would swallow the message: Stop is on while it runs.
  await expect(page.getByTestId('stop')).toBeDisabled({ timeout: 20_000 });
  const before = await transcript(page).count();
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByLabel('Message', { exact: true }).press('Enter');
  // The question and at least the start of the answer.
  await expect.poll(() => transcript(page).count(), { timeout: 20_000 }).toBeGreaterThanOrEqual(before + 2);
  await expect(transcript(page).last()).toHaveAttribute('data-status', wait, { timeout: 20_000 });
  if (wait === 'complete') await expect(page.getByTestId('stop')).toBeDisabled({ timeout: 20_000 });
}

/** A page of the app's own origin holding two frames side by side: two tabs (or devices) in one picture. */
async function sideBySide(page: Page, left: string, right: string): Promise<void> {
  const composite = '/__screenshots.html';
  await page.route(`**${composite}`, (route) =>
    route.fulfill({
      contentType: 'text/html',
      body: `<!doctype html><style>body{margin:0;display:flex;gap:8px;background:#ced4da}iframe{flex:1;height:100vh;border:0;background:#fff}</style><iframe src="${left}"></iframe><iframe src="${right}"></iframe>`,
    }),
  );
  await page.setViewportSize({ width: 1600, height: 900 });
  await page.goto(composite);
  for (const frame of page.frames().slice(1)) await frame.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
}

test('README images', async ({ page, context }) => {
  await page.goto('/');
  await ready(page);
  await say(page, 'goal: plan a weekend in Lisbon');
  await say(page, 'todo: book the train');
  await say(page, 'todo: find a fado bar');
  await say(page, 'What should we do first?', 'streaming');
  await expect(transcript(page).last()).toContainText('Keeping our goal in mind');
  await page.screenshot({ path: out('demo-chat-streaming') });
  await expect(transcript(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 20_000 });

  // The head of the chat panel: title, the meter's bar and its exact count.
  const panel = await page.locator('.chat').boundingBox();
  if (!panel) throw new Error('the chat panel is not on screen');
  await page.screenshot({ path: out('demo-token-meter'), clip: { x: panel.x, y: panel.y, width: panel.width, height: 80 } });

  const chat = new URL(page.url()).hash;
  await sideBySide(page, `/${chat}`, `/${chat}`);
  const [left, right] = page.frames().slice(1);
  if (!left || !right) throw new Error('the composite page has no frames');
  await left.getByLabel('Message', { exact: true }).fill('todo: buy pastéis de nata');
  await left.getByLabel('Message', { exact: true }).press('Enter');
  await expect(right.getByTestId('transcript').locator(':scope > li').last()).toContainText('pastéis de nata', { timeout: 20_000 });
  await expect(right.getByTestId('transcript').locator(':scope > li').last()).toHaveAttribute('data-status', 'complete', { timeout: 20_000 });
  await page.screenshot({ path: out('demo-two-tabs') });

  // Two devices of one user: sign in, then the same app with its own database as device 2.
  const devices = await context.browser()?.newContext({ baseURL: test.info().project.use.baseURL, viewport: { width: 1600, height: 900 } });
  if (!devices) throw new Error('no browser');
  const signIn = await devices.newPage();
  await signIn.goto('/');
  await ready(signIn);
  await signIn.getByLabel('Sign in to sync').fill('ann');
  // Signing in reloads the page: wait for the new one.
  await Promise.all([signIn.waitForEvent('load'), signIn.getByRole('button', { name: 'Sign in' }).click()]);
  await ready(signIn);
  await say(signIn, 'todo: pack sunscreen');
  await expect(signIn.getByTestId('sync-status')).toHaveText('Synced', { timeout: 20_000 });
  await signIn.close();
  const both = await devices.newPage();
  await sideBySide(both, '/', '/?device=2');
  const [one, two] = both.frames().slice(1);
  if (!one || !two) throw new Error('the composite page has no frames');
  await expect(two.getByTestId('chat-list')).toContainText('todo: pack sunscreen', { timeout: 20_000 });
  await two.getByTestId('chat-list').getByRole('button', { name: /pack sunscreen/ }).click();
  await expect(two.getByTestId('sync-status')).toHaveText('Synced', { timeout: 20_000 });
  await expect(one.getByTestId('sync-status')).toHaveText('Synced', { timeout: 20_000 });
  await both.screenshot({ path: out('demo-two-devices') });

  await devices.setOffline(true);
  await expect(one.getByTestId('offline-banner')).toBeVisible();
  await one.getByLabel('Message', { exact: true }).fill('todo: print the tickets');
  await one.getByLabel('Message', { exact: true }).press('Enter');
  await expect(one.getByTestId('sync-status')).toHaveText(/Offline · \d+ pending/, { timeout: 20_000 });
  await both.screenshot({ path: out('demo-offline') });
  await devices.setOffline(false);
  await devices.close();
});
