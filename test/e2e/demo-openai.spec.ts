import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from '@playwright/test';
import { expect, messages, openDemo, send, test } from './demo-fixtures.js';

const BASE = 'https://llm.test/v1';

async function useEndpoint(page: Page, baseUrl: string): Promise<void> {
  await page.getByTestId('open-settings').click();
  const dialog = page.getByTestId('settings');
  await dialog.getByLabel('OpenAI-compatible endpoint').check();
  await dialog.getByLabel('Base URL').fill(baseUrl);
  await dialog.getByLabel('API key').fill('sk-test');
  await dialog.getByLabel('Model', { exact: true }).fill('fake-model');
  await dialog.getByLabel('Context window (tokens)').fill('16384');
  await page.getByTestId('settings-save').click();
  await expect(page.getByTestId('tokens')).toContainText('/ 16,384 tokens');
}

const sse = (events: unknown[]) => `${events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('')}data: [DONE]\n\n`;
const delta = (value: object) => ({ choices: [{ index: 0, delta: value }] });

test('an OpenAI-compatible endpoint streams text and tool calls over SSE; a 429 shows inline and keeps the chat', async ({ page, allowConsole }) => {
  allowConsole(/status of 429/);
  const bodies: { messages: { role: string; content: unknown; tool_call_id?: string }[]; stream: boolean; tools: unknown[] }[] = [];
  const auth: (string | undefined)[] = [];
  let refuse = false;
  await page.route(`${BASE}/chat/completions`, async (route) => {
    bodies.push(route.request().postDataJSON() as (typeof bodies)[number]);
    auth.push(await route.request().headerValue('authorization') ?? undefined);
    if (refuse) {
      await route.fulfill({ status: 429, contentType: 'application/json', body: JSON.stringify({ error: { message: 'Rate limit reached' } }) });
      return;
    }
    const round = bodies.length;
    const body =
      round === 1
        ? // A tool call whose arguments arrive in pieces, as real endpoints send them.
          sse([
            delta({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'blackboard_set', arguments: '{"key":"go' } }] }),
            delta({ tool_calls: [{ index: 0, function: { arguments: 'al","value":"see the sea"}' } }] }),
          ])
        : sse([delta({ content: 'Noted: ' }), delta({ content: '**see the sea**' }), delta({ content: '.\n\n- pack\n- go' })]);
    await route.fulfill({ status: 200, headers: { 'content-type': 'text/event-stream' }, body });
  });
  await openDemo(page);
  await useEndpoint(page, BASE);

  await send(page, 'remember our goal');
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(messages(page)).toHaveCount(4);
  await expect(messages(page).nth(1)).toContainText('blackboard_set({"key":"goal","value":"see the sea"})');
  await expect(messages(page).nth(2)).toHaveAttribute('data-role', 'tool');
  await expect(messages(page).last().locator('strong')).toHaveText('see the sea');
  await expect(messages(page).last().locator('li')).toHaveText(['pack', 'go']);
  await expect(messages(page).last()).toContainText('Agent (fake-model)');
  await expect(page.getByTestId('board').locator('tr', { hasText: 'goal' })).toContainText('agent (fake-model)');

  expect(auth).toEqual(['Bearer sk-test', 'Bearer sk-test']);
  expect(bodies[0]?.stream).toBe(true);
  expect(bodies[0]?.tools.length).toBeGreaterThan(0);
  expect(bodies[0]?.messages.at(0)?.role).toBe('system');
  expect(bodies[0]?.messages.at(-1)).toEqual({ role: 'user', content: 'remember our goal' });
  // The second round carries the tool's result.
  expect(bodies[1]?.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_1', content: 'ok: goal = "see the sea"' });

  // A 429: said inline, the conversation stays, Retry is offered.
  refuse = true;
  await send(page, 'and then?');
  await expect(page.getByTestId('chat-error')).toContainText('HTTP 429');
  await expect(page.getByTestId('chat-error')).toContainText('Rate limit reached');
  await expect(messages(page)).toHaveCount(5);
  await expect(messages(page).last()).toContainText('and then?');
  await expect(page.getByTestId('retry')).toBeVisible();
  refuse = false;
  await page.getByTestId('retry').click();
  await expect(messages(page).last()).toHaveAttribute('data-status', 'complete', { timeout: 15_000 });
  await expect(page.getByTestId('chat-error')).toBeHidden();
});

test('Stop aborts the request to the endpoint mid-stream and keeps what arrived', async ({ page }) => {
  // A real server, so the reply can stream slowly and the test can see the connection close.
  let closed: () => void = () => undefined;
  const requestClosed = new Promise<void>((resolve) => (closed = resolve));
  let wroteFirst: () => void = () => undefined;
  const firstChunk = new Promise<void>((resolve) => (wroteFirst = resolve));
  const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization, content-type', 'access-control-allow-methods': 'POST' };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors).end();
      return;
    }
    res.writeHead(200, { ...cors, 'content-type': 'text/event-stream' });
    res.write(`data: ${JSON.stringify(delta({ content: 'The first words ' }))}\n\n`, () => wroteFirst());
    // Never finishes by itself: only the client's abort ends it.
    res.on('close', () => closed());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    await openDemo(page);
    await useEndpoint(page, `http://127.0.0.1:${port}/v1`);
    await send(page, 'tell me a long story');
    await firstChunk;
    await expect(messages(page).last()).toContainText('The first words');
    await expect(page.getByTestId('stop')).toBeEnabled();
    await page.getByTestId('stop').click();
    await requestClosed;
    await expect(messages(page).last()).toHaveAttribute('data-status', 'interrupted', { timeout: 10_000 });
    await expect(messages(page).last()).toContainText('The first words');
    await expect(page.getByTestId('continue')).toBeVisible();
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
