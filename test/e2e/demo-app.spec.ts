import { expect, messages, openDemo, send, test } from './demo-fixtures.js';

test('the agent answers with a tool call, streams durably, and shares the chat and its blackboard across tabs', async ({ context }) => {
  const a = await context.newPage();
  const b = await context.newPage();
  await openDemo(a);
  await openDemo(b);
  await expect(a.getByTestId('counter-mode')).toContainText('worker');
  await expect(a.getByTestId('sync-status')).toContainText('Sync off');

  // A chat made in tab A appears in tab B's list without a reload, titled from its first message.
  await expect(a.getByTestId('chat-list').locator('li')).toHaveCount(1);
  await a.getByTestId('new-chat').click();
  await expect(a.getByTestId('chat-list').locator('li')).toHaveCount(2);
  await send(a, 'goal: ship the demo');
  const lastA = messages(a).last();
  await expect(lastA).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(lastA).toContainText('Goal set: “ship the demo”');
  await expect(messages(a).filter({ hasText: 'tool call' })).toContainText('blackboard_set');
  await expect(b.getByTestId('chat-list')).toContainText('goal: ship the demo');
  await b.getByTestId('chat-list').getByRole('button', { name: /goal: ship the demo/ }).click();
  await expect(messages(b)).toHaveCount(4);
  await expect(messages(b).first()).toContainText('You');

  // The agent's tool wrote the goal: tab B sees it live, and who wrote it.
  const boardB = b.getByTestId('board');
  await expect(boardB).toContainText('"ship the demo"');
  await expect(boardB.locator('tr', { hasText: 'goal' })).toContainText('agent (scripted)');

  // A JSON edit in tab B reaches tab A, attributed to a person; bad JSON is refused with feedback.
  const editor = b.getByLabel('Edit as JSON');
  await editor.fill('{"goal": "ship the demo", "owner": ');
  await b.getByTestId('board-save').click();
  await expect(b.getByTestId('board-feedback')).toContainText('Not JSON');
  await expect(editor).toHaveAttribute('aria-invalid', 'true');
  await editor.fill('{"goal": "ship the demo", "owner": "ann"}');
  await b.getByTestId('board-save').click();
  await expect(b.getByTestId('board-feedback')).toHaveText('Saved.');
  await expect(a.getByTestId('board').locator('tr', { hasText: 'owner' })).toContainText('"ann"');
  await expect(a.getByTestId('board').locator('tr', { hasText: 'owner' })).toContainText('you · device 1');

  // Tokens are counted exactly in the worker, split between the prefix and the messages.
  await expect(a.getByTestId('tokens')).toContainText(/^[\d,]+ \/ 8,192 tokens · prefix \d+ · messages \d+ · o200k_base$/);

  // Send is enabled only with text and no reply running; Stop only while one runs.
  await expect(a.getByTestId('send')).toBeDisabled();
  await expect(a.getByTestId('stop')).toBeDisabled();
  // The reply holds after its first word (the demo's test seam), so the stop below finds it streaming.
  await a.evaluate(() => void ((globalThis as { demoHoldReplies?: boolean }).demoHoldReplies = true));
  await send(a, 'tell me everything about this demo');
  await expect(messages(a).last()).toHaveAttribute('data-status', 'streaming', { timeout: 10_000 });
  await expect(b.getByTestId('stop')).toBeEnabled();
  // Stop in tab B interrupts the turn running in tab A; what was streamed is kept.
  await b.getByTestId('stop').click();
  await expect(a.getByTestId('status')).toContainText('Stopped', { timeout: 10_000 });
  await expect(messages(a).last()).toHaveAttribute('data-status', 'interrupted');
  const partial = (await messages(a).last().locator('.body').textContent()) ?? '';

  // Continue streams the rest of the same answer into a new message.
  await expect(a.getByTestId('recover')).toBeVisible();
  await a.evaluate(() => void ((globalThis as { demoHoldReplies?: boolean }).demoHoldReplies = false));
  await a.getByTestId('continue').click();
  await expect(messages(a).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  const rest = (await messages(a).last().locator('.body').textContent()) ?? '';
  expect(`${partial}${rest}`.replace(/\s+/g, ' ')).toContain('Press Esc to stop me.');
  await expect(a.getByTestId('recover')).toBeHidden();

  // Reload keeps everything.
  const count = await messages(a).count();
  await a.reload();
  await a.waitForFunction(() => (window as unknown as { demoReady?: boolean }).demoReady === true);
  await expect(messages(a)).toHaveCount(count);
  await expect(a.getByTestId('board')).toContainText('"ann"');
});

test('Esc stops a reply, Retry replaces it, Shift+Enter adds a line', async ({ page }) => {
  await openDemo(page);
  const box = page.getByLabel('Message', { exact: true });
  await box.fill('first line');
  await box.press('Shift+Enter');
  await box.pressSequentially('second line');
  await expect(box).toHaveValue('first line\nsecond line');
  // The reply holds after its first word (the demo's test seam), so Esc finds it streaming.
  await page.evaluate(() => void ((globalThis as { demoHoldReplies?: boolean }).demoHoldReplies = true));
  await box.press('Enter');
  await expect(messages(page).first()).toContainText('first line\nsecond line');
  await expect(messages(page).last()).toHaveAttribute('data-status', 'streaming', { timeout: 10_000 });
  await page.keyboard.press('Escape');
  await expect(messages(page).last()).toHaveAttribute('data-status', 'interrupted', { timeout: 10_000 });
  await expect(messages(page)).toHaveCount(2);
  await page.evaluate(() => void ((globalThis as { demoHoldReplies?: boolean }).demoHoldReplies = false));
  await page.getByTestId('retry').click();
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  // Retry dropped the interrupted reply: one question, one answer.
  await expect(messages(page)).toHaveCount(2);
  await expect(page.getByTestId('chat-title')).toHaveText('first line second line');
});

test('chats are renamed, searched and deleted with confirmation, live in another tab', async ({ context }) => {
  const a = await context.newPage();
  const b = await context.newPage();
  await openDemo(a);
  await send(a, 'plan a picnic');
  await expect(messages(a).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await a.getByTestId('new-chat').click();
  await expect(a.getByTestId('chat-list').locator('li')).toHaveCount(2);
  await send(a, 'todo: buy bread');
  await expect(messages(a).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await openDemo(b);
  await expect(b.getByTestId('chat-list').locator('li')).toHaveCount(2);

  await a.getByTestId('rename').click();
  await a.getByLabel('Chat title').fill('Shopping');
  await a.getByLabel('Chat title').press('Enter');
  await expect(a.getByTestId('chat-title')).toHaveText('Shopping');
  await expect(b.getByTestId('chat-list')).toContainText('Shopping');

  // Search matches titles and message text.
  await b.getByLabel('Search chats').fill('picnic');
  await expect(b.getByTestId('chat-list').locator('li')).toHaveCount(1);
  await b.getByLabel('Search chats').fill('bread');
  await expect(b.getByTestId('chat-list').locator('li')).toHaveText([/Shopping/]);
  await b.getByLabel('Search chats').fill('');

  // Delete asks first; Cancel keeps the chat, Delete removes it everywhere.
  await a.getByTestId('delete').click();
  await expect(a.getByTestId('confirm-delete')).toBeVisible();
  await a.getByRole('button', { name: 'Cancel' }).click();
  await expect(a.getByTestId('chat-list').locator('li')).toHaveCount(2);
  await a.getByTestId('delete').click();
  await a.getByTestId('confirm-yes').click();
  await expect(a.getByTestId('chat-list').locator('li')).toHaveCount(1);
  await expect(b.getByTestId('chat-list').locator('li')).toHaveCount(1);
  await expect(b.getByTestId('chat-list')).not.toContainText('Shopping');
});

test('a reply carrying HTML and script payloads renders inert', async ({ page }) => {
  await openDemo(page);
  const ran: string[] = [];
  await page.exposeFunction('pwned', () => ran.push('a payload ran'));
  const payloads = ['<img src=x onerror="window.pwned()">', '<script>window.pwned()</script>', '[click](javascript:window.pwned())', '<a href="javascript:window.pwned()">link</a>'];
  await send(page, payloads.join(' '));
  const reply = messages(page).last();
  await expect(reply).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  // The raw HTML shows as text; nothing became an element that could run.
  await expect(reply.locator('.body')).toContainText('<img src=x onerror="window.pwned()">');
  await expect(reply.locator('.body')).toContainText('<script>window.pwned()</script>');
  await expect(reply.locator('img, script, iframe, [onerror]')).toHaveCount(0);
  for (const href of await reply.locator('a').evaluateAll((links) => links.map((link) => link.getAttribute('href')))) {
    expect(href ?? '').not.toMatch(/^\s*javascript:/i);
  }
  // Clicking what is left of the links runs nothing either.
  for (const link of await reply.locator('a').all()) await link.click();
  expect(ran).toEqual([]);
});
