import { expect, test } from '@playwright/test';

test('the demo builds, forks, slices and diffs a working context', async ({ page }) => {
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto('/playground.html');

  const main = page.getByTestId('main-messages').locator('li');
  await expect(main).toHaveCount(4);
  await expect(page.getByTestId('main-meta')).toContainText('4 messages');

  await page.getByPlaceholder('Say something as the user').fill('And a good bakery?');
  await page.getByRole('button', { name: 'Append' }).click();
  await expect(main).toHaveCount(5);
  await expect(main.last()).toContainText('And a good bakery?');

  // lastTurns(1) keeps the turn that starts at the newest user message.
  await expect(page.getByTestId('slice-messages').locator('li')).toHaveText(['userAnd a good bakery?']);
  await page.getByTestId('turns').fill('2');
  await expect(page.getByTestId('slice-messages').locator('li')).toHaveCount(3);

  await page.getByTestId('fork').click();
  await expect(page.getByTestId('fork-messages').locator('li')).toHaveCount(5);
  await page.getByTestId('fork-reply').click();
  await expect(page.getByTestId('fork-messages').locator('li')).toHaveCount(6);
  await expect(main).toHaveCount(5);

  const diff = JSON.parse((await page.getByTestId('diff').textContent()) ?? '{}') as Record<string, unknown>;
  expect(diff).toEqual({
    messagesAdded: ['Alternative plan #1: add a day trip to Óbidos.'],
    messagesRemoved: [],
    scratchpadChanges: { days: 4 },
    prefixChanged: false,
  });

  await page.getByTestId('merge').click();
  await page.getByTestId('merge').click();
  await expect(main).toHaveCount(6);
  expect(errors).toEqual([]);
});
