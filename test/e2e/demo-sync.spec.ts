import type { Page } from '@playwright/test';
import { expect, messages, openDemo, send, test, uniqueUser } from './demo-fixtures.js';

async function signIn(page: Page, user: string): Promise<void> {
  await openDemo(page);
  await expect(page.getByTestId('sync-status')).toHaveText('Sync off (sign in to sync)');
  await page.getByLabel('Sign in to sync').fill(user);
  // Signing in reloads the page: wait for the new one.
  await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Sign in' }).click()]);
  await page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
  await expect(page.getByTestId('user')).toHaveText(user);
}

test('two devices of one user converge through the demo server, and a device offline queues then catches up', async ({ newDevice, allowConsole }) => {
  // The browser logs the requests that fail while a device is offline; they are the point of the test.
  allowConsole(/Failed to load resource: net::ERR_INTERNET_DISCONNECTED/);
  const user = uniqueUser('e2e');
  const deviceA = await newDevice();
  const deviceB = await newDevice();
  const a = await deviceA.newPage();
  const b = await deviceB.newPage();
  await signIn(a, user);
  await expect(a.getByTestId('sync-status')).toHaveText('Synced', { timeout: 20_000 });
  await expect(a.getByTestId('another-device')).toHaveAttribute('href', /\?device=2$/);

  await send(a, 'todo: pack the tent');
  await expect(messages(a).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await a.getByTestId('sync-now').click();
  await expect(a.getByTestId('sync-status')).toHaveText('Synced', { timeout: 20_000 });

  // Device B signs in as the same user and gets the chat from the server.
  await signIn(b, user);
  const chat = b.getByTestId('chat-list').getByRole('button', { name: /todo: pack the tent/ });
  await expect(chat).toBeVisible({ timeout: 20_000 });
  await chat.click();
  await expect(messages(b)).toHaveCount(4);
  await expect(messages(b).last()).toContainText('pack the tent');
  const tokensA = (await a.getByTestId('tokens').textContent()) ?? '';
  await expect(b.getByTestId('tokens')).toHaveText(tokensA);

  // Device B goes offline: its message waits in the outbox, and the badge says so.
  await deviceB.setOffline(true);
  await expect(b.getByTestId('offline-banner')).toBeVisible();
  await send(b, 'plan the route');
  await expect(messages(b).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(b.getByTestId('sync-status')).toHaveText(/^Offline · \d+ pending$/);
  await deviceB.setOffline(false);
  await expect(b.getByTestId('sync-status')).toHaveText('Synced', { timeout: 30_000 });

  // Device A sees it without a reload.
  await expect(messages(a)).toHaveCount(6, { timeout: 20_000 });
  await expect(messages(a).nth(4)).toContainText('plan the route');
});
