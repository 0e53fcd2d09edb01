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
