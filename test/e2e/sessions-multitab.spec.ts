import { expect, test } from '@playwright/test';
import { openHarness, uniqueDbName } from './harness.js';

test('4 tabs append 250 messages each to one session: 1000 messages, each once, one order everywhere', async ({ context }) => {
  const name = uniqueDbName('multitab');
  const tabs = await Promise.all(Array.from({ length: 4 }, () => context.newPage()));
  for (const tab of tabs) await openHarness(tab);

  // Every tab opens the session and counts the append events it sees, its own and the others'. Only
  // appends: the first tab's session.create may reach a later tab after it subscribed (a broadcast is
  // asynchronous), and it is not what this test counts.
  for (const tab of tabs) {
    await tab.evaluate(async (dbName) => {
      const db = await window.tabula.openTabula({ name: dbName });
      const session = await db.session('shared');
      const w = window as unknown as { session: typeof session; events: { tab: number; local: number } };
      w.session = session;
      w.events = { tab: 0, local: 0 };
      session.subscribe((change) => {
        if (!change.kinds.includes('message.append')) return;
        if (change.origin === 'tab') w.events.tab += 1;
        if (change.origin === 'local') w.events.local += 1;
      });
    }, name);
  }

  await Promise.all(
    tabs.map((tab, t) =>
      tab.evaluate(async (tabIndex) => {
        const { session } = window as unknown as { session: { append(m: unknown): Promise<unknown> } };
        // Appends race with the other tabs; several are in flight at once in this tab too.
        const pending: Promise<unknown>[] = [];
        for (let i = 0; i < 250; i++) {
          pending.push(session.append({ role: 'user', content: `tab${tabIndex}-msg${i}` }));
          if (pending.length === 10) await Promise.all(pending.splice(0));
        }
        await Promise.all(pending);
      }, t),
    ),
  );

  const views = await Promise.all(
    tabs.map((tab) =>
      tab.evaluate(async () => {
        const w = window as unknown as {
          session: { messages(): Promise<{ id: string; content: string; order: string }[]>; messageCount(): Promise<number> };
        };
        const messages = await w.session.messages();
        return { ids: messages.map((m) => m.id), contents: messages.map((m) => m.content), orders: messages.map((m) => m.order), count: await w.session.messageCount() };
      }),
    ),
  );

  const first = views[0]!;
  expect(first.ids).toHaveLength(1000);
  expect(new Set(first.ids).size).toBe(1000);
  expect(new Set(first.contents).size).toBe(1000);
  expect(first.count).toBe(1000);
  expect([...first.orders].sort()).toEqual(first.orders);
  for (const view of views) expect(view.ids).toEqual(first.ids);
  // Within each tab, its own messages keep the order it appended them in.
  for (let t = 0; t < 4; t++) {
    const mine = first.contents.filter((c) => c.startsWith(`tab${t}-`));
    expect(mine).toEqual(Array.from({ length: 250 }, (_, i) => `tab${t}-msg${i}`));
  }

  // subscribe() fired in every tab, for its own appends and for the other tabs'.
  for (const tab of tabs) {
    await expect
      .poll(() => tab.evaluate(() => (window as unknown as { events: { tab: number; local: number } }).events))
      .toEqual({ local: 250, tab: 750 });
  }
});

test('two tabs save with the same expectedVersion: exactly one wins, the other gets session/conflict', async ({ context }) => {
  const name = uniqueDbName('conflict');
  const [a, b] = await Promise.all([context.newPage(), context.newPage()]);
  for (const tab of [a, b]) await openHarness(tab);
  const setup = async (page: typeof a, who: string) =>
    page.evaluate(
      async ({ dbName, who: author }) => {
        const db = await window.tabula.openTabula({ name: dbName });
        const session = await db.session('plan');
        const { version } = await session.state();
        const w = window as unknown as { attempt: () => Promise<string> };
        w.attempt = async () => {
          try {
            await session.save({ summary: `written by ${author}` }, { expectedVersion: version });
            return 'won';
          } catch (error) {
            return (error as { code?: string }).code ?? 'unknown';
          }
        };
        return version;
      },
      { dbName: name, who },
    );
  expect(await setup(a, 'A')).toBe(0);
  expect(await setup(b, 'B')).toBe(0);
  const results = await Promise.all([a, b].map((tab) => tab.evaluate(() => (window as unknown as { attempt: () => Promise<string> }).attempt())));
  expect([...results].sort()).toEqual(['session/conflict', 'won']);
  const state = await a.evaluate(async (dbName) => {
    const db = await window.tabula.openTabula({ name: dbName });
    return (await db.session('plan')).state();
  }, name);
  expect(state.version).toBe(1);
  expect(state.summary).toBe(results[0] === 'won' ? 'written by A' : 'written by B');
});
