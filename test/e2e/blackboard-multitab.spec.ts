import { expect, test, type Page } from '@playwright/test';
import { openHarness, uniqueDbName } from './harness.js';

interface BoardWindow {
  board: {
    set(k: string, v: unknown): void;
    delete(k: string): void;
    update(v: Record<string, unknown>): void;
    toJSON(): Record<string, unknown>;
    flushed(): Promise<void>;
    whenLoaded: Promise<void>;
  };
}

async function openBoard(page: Page, dbName: string): Promise<void> {
  await openHarness(page);
  await page.evaluate(async (name) => {
    const db = await window.tabula.openTabula({ name });
    const session = await db.session('board');
    await session.blackboard.whenLoaded;
    (window as unknown as BoardWindow).board = session.blackboard;
  }, dbName);
}

const boardOf = (page: Page) => page.evaluate(() => (window as unknown as BoardWindow).board.toJSON());

test('3 tabs write 500 random ops each at once: every tab ends identical, after reload too, and a late tab sees it all', async ({ context }) => {
  const name = uniqueDbName('board');
  const tabs = await Promise.all([0, 1, 2].map(() => context.newPage()));
  for (const tab of tabs) await openBoard(tab, name);

  await Promise.all(
    tabs.map((tab, t) =>
      tab.evaluate(async (index) => {
        const { board } = window as unknown as BoardWindow;
        let seed = 1000 + index;
        const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
        const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
        for (let i = 0; i < 500; i++) {
          const key = keys[Math.floor(random() * keys.length)]!;
          const roll = random();
          if (roll < 0.6) board.set(key, { by: index, i, v: Math.floor(random() * 1e6) });
          else if (roll < 0.8) board.delete(key);
          else board.update({ [key]: i, [`${key}-x`]: [index, i] });
          // Yield now and then so the three tabs really interleave.
          if (i % 25 === 0) await new Promise((resolve) => setTimeout(resolve, 0));
        }
      }, t),
    ),
  );
  const lastWriteAt = Date.now();

  let converged = 0;
  await expect
    .poll(
      async () => {
        const states = await Promise.all(tabs.map(boardOf));
        const same = states.every((state) => JSON.stringify(state) === JSON.stringify(states[0]));
        if (same) converged = Date.now() - lastWriteAt;
        return same;
      },
      { timeout: 30_000, intervals: [50] },
    )
    .toBe(true);
  test.info().annotations.push({ type: 'converged after last write (ms)', description: String(converged) });
  const agreed = await boardOf(tabs[0]!);
  expect(Object.keys(agreed).length).toBeGreaterThan(10);

  for (const tab of tabs) await tab.evaluate(() => (window as unknown as BoardWindow).board.flushed());
  for (const tab of tabs) {
    await tab.reload();
    await openBoard(tab, name);
    expect(await boardOf(tab)).toEqual(agreed);
  }

  const late = await context.newPage();
  await openBoard(late, name);
  await expect.poll(() => boardOf(late)).toEqual(agreed);
});

test('flushed() then a crash: every flushed change is there after reopening', async ({ context }) => {
  const name = uniqueDbName('board-crash');
  const page = await context.newPage();
  await openBoard(page, name);
  await page.evaluate(async () => {
    const { board } = window as unknown as BoardWindow;
    for (let i = 0; i < 200; i++) board.set(`key${i}`, { i, text: `value ${i}` });
    await board.flushed();
  });
  const cdp = await context.newCDPSession(page);
  void cdp.send('Page.crash').catch(() => undefined);
  await page.waitForEvent('crash').catch(() => undefined);

  const reopened = await context.newPage();
  await openBoard(reopened, name);
  const board = await boardOf(reopened);
  expect(Object.keys(board)).toHaveLength(200);
  expect(board.key199).toEqual({ i: 199, text: 'value 199' });
});

interface LifeWindow {
  db: Awaited<ReturnType<typeof window.tabula.openTabula>>;
  board: BoardWindow['board'];
}

/** Opens `sessionId` in a fresh Tabula on `page` and keeps its board as `window.board`. */
async function openSessionBoard(page: Page, dbName: string): Promise<void> {
  await openHarness(page);
  await page.evaluate(async (name) => {
    const w = window as unknown as LifeWindow;
    w.db = await window.tabula.openTabula({ name });
    const session = await w.db.session('s');
    await session.blackboard.whenLoaded;
    w.board = session.blackboard;
  }, dbName);
}

test('a deleted session’s blackboard closes in the other tab and never comes back (issue 10 item 1)', async ({ context }) => {
  const name = uniqueDbName('board-delete');
  const [tabA, tabB] = await Promise.all([context.newPage(), context.newPage()]);
  await openSessionBoard(tabA, name);
  await openSessionBoard(tabB, name);
  await tabA.evaluate(() => (window as unknown as LifeWindow).board.set('secret', 'old life'));
  await expect.poll(() => boardOf(tabB)).toEqual({ secret: 'old life' });

  await tabA.evaluate(async () => {
    const w = window as unknown as LifeWindow;
    await w.db.deleteSession('s');
    const again = await w.db.session('s');
    await again.blackboard.whenLoaded;
    w.board = again.blackboard;
  });
  // Tab B learns of the delete: its board refuses writes with session/not-found.
  await expect
    .poll(() =>
      tabB.evaluate(() => {
        try {
          (window as unknown as LifeWindow).board.set('late', 1);
          return 'accepted';
        } catch (error) {
          return (error as { code?: string }).code ?? String(error);
        }
      }),
    )
    .toBe('session/not-found');
  // A write from a new-life page reaching tab A proves the tabs have exchanged state since the delete.
  const tabC = await context.newPage();
  await openSessionBoard(tabC, name);
  await tabC.evaluate(() => (window as unknown as LifeWindow).board.set('marker', 'new life'));
  await expect.poll(() => boardOf(tabA)).toEqual({ marker: 'new life' });
  await tabA.evaluate(() => (window as unknown as LifeWindow).board.flushed());

  for (const tab of [tabA, tabB, tabC]) await tab.close();
  const reopened = await context.newPage();
  await openSessionBoard(reopened, name);
  expect(await boardOf(reopened)).toEqual({ marker: 'new life' });
});
