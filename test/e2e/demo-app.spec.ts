import { expect, test, type Page } from '@playwright/test';

async function openDemo(page: Page, chat: string): Promise<void> {
  await page.goto(`/#${chat}`);
  await page.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
}

test('the demo agent answers, streams durably, and shares its blackboard across tabs', async ({ context }) => {
  const chat = `e2e-${Date.now().toString(36)}`;
  const a = await context.newPage();
  const b = await context.newPage();
  const errors: string[] = [];
  for (const page of [a, b]) page.on('pageerror', (error) => errors.push(error.message));
  await openDemo(a, chat);
  await openDemo(b, chat);
  await expect(a.getByTestId('counter-mode')).toContainText('worker');

  // A turn in tab A: the reply streams in, completes, and tab B shows the same transcript.
  await a.getByPlaceholder(/Ask the agent/).fill('goal: ship the demo');
  await a.getByTestId('send').click();
  const lastA = a.getByTestId('transcript').locator('li').last();
  await expect(lastA).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(lastA).toContainText('Goal set: “ship the demo”');
  await expect(b.getByTestId('transcript').locator('li')).toHaveCount(2);
  await expect(b.getByTestId('transcript').locator('li').last()).toContainText('Goal set');

  // The agent wrote the goal to the blackboard; tab B sees it live.
  await expect(b.getByTestId('board')).toContainText('goal');
  await expect(b.getByTestId('board')).toContainText('"ship the demo"');

  // A blackboard edit in tab B reaches tab A.
  await b.locator('[data-testid="board-form"] input[name="key"]').fill('owner');
  await b.locator('[data-testid="board-form"] input[name="value"]').fill('"ann"');
  await b.locator('[data-testid="board-form"] button').click();
  await expect(a.getByTestId('board')).toContainText('"ann"');

  // Tokens are counted exactly in the worker and shown.
  await expect(a.getByTestId('tokens')).toContainText(/2 messages · \d+ tokens \(o200k_base\)/);

  // Stop in tab B interrupts the turn running in tab A; what was streamed is kept.
  await a.getByPlaceholder(/Ask the agent/).fill('tell me everything about this demo');
  await a.getByTestId('send').click();
  await expect(a.getByTestId('transcript').locator('li').last()).toHaveAttribute('data-status', 'streaming', { timeout: 10_000 });
  await b.getByTestId('stop').click();
  await expect(a.getByTestId('status')).toContainText('Stopped', { timeout: 10_000 });
  await expect(a.getByTestId('transcript').locator('li').last()).toHaveAttribute('data-status', 'interrupted');

  // Reload keeps everything.
  await a.reload();
  await a.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
  await expect(a.getByTestId('transcript').locator('li')).toHaveCount(4);
  await expect(a.getByTestId('board')).toContainText('"ann"');
  expect(errors).toEqual([]);
});
