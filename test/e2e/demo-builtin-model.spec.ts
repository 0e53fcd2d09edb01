import { expect, messages, openDemo, send, test } from './demo-fixtures.js';

test("Chrome's built-in model, where the browser has one, answers through the Prompt API", async ({ page }) => {
  // This Chromium has no model: a stand-in with the Prompt API's shape records what the demo asks.
  await page.addInitScript(() => {
    const seen: { prompts: unknown[]; input: string }[] = [];
    Object.assign(window, {
      builtinCalls: seen,
      LanguageModel: {
        availability: async () => 'available',
        create: async ({ initialPrompts }: { initialPrompts: unknown[] }) => ({
          promptStreaming: (input: string) => {
            seen.push({ prompts: initialPrompts, input });
            return new ReadableStream<string>({
              start(controller) {
                for (const piece of ['Built-in ', 'says ', '**hi**']) controller.enqueue(piece);
                controller.close();
              },
            });
          },
          destroy: () => undefined,
        }),
      },
    });
  });
  await openDemo(page);
  await page.getByTestId('open-settings').click();
  const option = page.getByTestId('builtin-option');
  await expect(option).toBeEnabled();
  await option.check();
  await page.getByTestId('settings-save').click();

  await send(page, 'hello there');
  const reply = messages(page).last();
  await expect(reply).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(reply).toContainText('Agent (chrome-built-in)');
  await expect(reply.locator('strong')).toHaveText('hi');
  const calls = await page.evaluate(() => (window as unknown as { builtinCalls: { prompts: { role: string }[]; input: string }[] }).builtinCalls);
  expect(calls).toHaveLength(1);
  expect(calls[0]?.input).toBe('hello there');
  expect(calls[0]?.prompts[0]?.role).toBe('system');
});
