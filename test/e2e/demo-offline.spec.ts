import { expect, messages, openDemo, send, test, uniqueUser } from './demo-fixtures.js';

const preview = (path: string) => new URL(path, process.env.E2E_PREVIEW_URL).href;

test('after one visit the built demo reloads with the network off and shows its chats', async ({ context, page, allowConsole }) => {
  // Requests the app makes while offline (the server probe, sync) fail, and the browser logs them.
  allowConsole(/net::ERR_INTERNET_DISCONNECTED/);
  await openDemo(page, preview('/'));
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  // Chromium's own verdict on the manifest, icons and service worker: the app installs as a PWA
  // (a Playwright context is incognito, which alone would forbid installing; that one is not the app's doing).
  const cdp = await context.newCDPSession(page);
  const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
  expect(installabilityErrors.filter((error) => error.errorId !== 'in-incognito')).toEqual([]);
  await cdp.detach();
  await expect(page.getByTestId('sync-status')).toHaveText('Sync off (sign in to sync)');
  await send(page, 'todo: survive a train tunnel');
  // The whole turn first (the request, the tool call, its result, the reply) and the board it wrote:
  // a reload before the turn ends would interrupt it.
  await expect(messages(page)).toHaveCount(4, { timeout: 15_000 });
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(page.getByTestId('board')).toContainText('survive a train tunnel');

  await context.setOffline(true);
  // The network is really gone for the service worker too, so what follows comes from its cache.
  const worker = context.serviceWorkers()[0];
  expect(worker).toBeDefined();
  expect(await worker?.evaluate(() => fetch('/manifest.webmanifest?probe', { cache: 'no-store' }).then(() => 'reached', () => 'failed'))).toBe('failed');

  await page.reload();
  await page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
  await expect(page.getByTestId('offline-banner')).toBeVisible();
  await expect(page.getByTestId('sync-status')).toHaveText('Sync off (no server)');
  await expect(messages(page)).toHaveCount(4);
  await expect(page.getByTestId('board')).toContainText('survive a train tunnel');
  // And it still works: the scripted agent needs no network.
  await send(page, 'done');
  await expect(messages(page).last()).toContainText('Checked off the first todo', { timeout: 15_000 });
  await context.setOffline(false);
});

test('without the demo server (a static build) the demo runs with sync off', async ({ page, allowConsole }) => {
  allowConsole(/status of 404/);
  await page.route('**/demo-api/**', (route) => route.fulfill({ status: 404, body: 'Not Found' }));
  await openDemo(page);
  await expect(page.getByTestId('sync-status')).toHaveText('Sync off (no server)');
  await expect(page.getByTestId('sign-in')).toBeHidden();
  await send(page, 'hello');
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
});

test('a signed-in device that starts offline queues its changes and syncs them when the network is back', async ({ context, page, allowConsole }) => {
  allowConsole(/net::ERR_INTERNET_DISCONNECTED/);
  await openDemo(page, preview('/'));
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  await page.getByLabel('Sign in to sync').fill(uniqueUser('offline'));
  // Signing in reloads the page: wait for the new one.
  await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Sign in' }).click()]);
  await page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
  await expect(page.getByTestId('sync-status')).toHaveText('Synced', { timeout: 20_000 });

  await context.setOffline(true);
  await page.reload();
  await page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
  await send(page, 'written in a tunnel');
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(page.getByTestId('sync-status')).toHaveText(/^Offline · \d+ pending$/, { timeout: 20_000 });

  await context.setOffline(false);
  await expect(page.getByTestId('sync-status')).toHaveText('Synced', { timeout: 30_000 });
});
