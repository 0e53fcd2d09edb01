import { expect, test, type Page } from '@playwright/test';
import { openHarness } from './harness.js';

const TEXTS = ['The quick brown fox jumps over the lazy dog.', 'function f(x) { return x * 2; }', '今天天气很好。', '🚀 launch 🚀'];

async function startCounter(page: Page): Promise<string> {
  await openHarness(page);
  return page.evaluate(async () => {
    const counter = window.tabula.createTokenCounter({ worker: 'shared' });
    (window as unknown as { counter: typeof counter }).counter = counter;
    return counter.ready;
  });
}

const countAll = (page: Page, texts: string[]) =>
  page.evaluate(async (list) => {
    const { counter } = window as unknown as { counter: { countText(t: string): Promise<number> } };
    return Promise.all(list.map((text) => counter.countText(text)));
  }, texts);

test('two tabs share one SharedWorker tokenizer; closing one leaves the other counting', async ({ context }) => {
  const a = await context.newPage();
  const b = await context.newPage();
  expect(await startCounter(a)).toBe('shared');
  expect(await startCounter(b)).toBe('shared');

  // Both tabs count at once, each many texts, through the same worker.
  const many = Array.from({ length: 200 }, (_, i) => `${TEXTS[i % TEXTS.length]} #${i}`);
  const [fromA, fromB] = await Promise.all([countAll(a, many), countAll(b, many)]);
  const reference = await a.evaluate(async (list) => {
    const counter = window.tabula.createTokenCounter({ worker: 'none' });
    const out = await Promise.all(list.map((text) => counter.countText(text)));
    counter.close();
    return out;
  }, many);
  expect(fromA).toEqual(reference);
  expect(fromB).toEqual(reference);

  await a.close();
  const after = await countAll(b, TEXTS.map((t) => `${t} after A closed`));
  const expected = await b.evaluate(async (list) => {
    const counter = window.tabula.createTokenCounter({ worker: 'none' });
    const out = await Promise.all(list.map((text) => counter.countText(text)));
    counter.close();
    return out;
  }, TEXTS.map((t) => `${t} after A closed`));
  expect(after).toEqual(expected);
  expect(await b.evaluate(() => (window as unknown as { counter: { mode: string } }).counter.mode)).toBe('shared');
});

test('opening sessions, appending and reading fetch no tokenizer; the first count starts it and is exact (issue 9 item 5)', async ({ context }) => {
  const page = await context.newPage();
  const fetched: string[] = [];
  context.on('request', (request) => fetched.push(request.url()));
  const tokenizer = (url: string) => /gpt-tokenizer|o200k|cl100k|-worker/.test(url);
  await openHarness(page);
  await page.evaluate(async () => {
    const tabula = await window.tabula.openTabula({ name: `lazy-${Date.now()}` });
    (window as unknown as { lazy: typeof tabula }).lazy = tabula;
    for (const id of ['a', 'b']) {
      const session = await tabula.session(id);
      await session.append([
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 'hi there' },
      ]);
      await session.messages();
      await session.blackboard.whenLoaded;
    }
    await tabula.sessions();
  });
  expect(fetched.filter(tokenizer)).toEqual([]);

  const tokens = await page.evaluate(async () => {
    const session = await (window as unknown as { lazy: Awaited<ReturnType<typeof window.tabula.openTabula>> }).lazy.session('a');
    return session.tokens();
  });
  // "user\nhello" and "assistant\nhi there" in o200k_base, plus 4 per message.
  const expected = await page.evaluate(async () => {
    const counter = window.tabula.createTokenCounter({ worker: 'none' });
    const n = await counter.count([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'hi there' },
    ]);
    counter.close();
    return n;
  });
  expect(tokens).toBe(expected);
  // The same observation sees the worker once counting started: the empty list above means something.
  expect(fetched.some((url) => /o200k-worker/.test(url)), fetched.filter(tokenizer).join(', ')).toBe(true);
  await page.evaluate(() => (window as unknown as { lazy: { close(): Promise<void> } }).lazy.close());
});
