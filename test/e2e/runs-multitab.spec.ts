import { expect, test, type Page } from '@playwright/test';
import { openHarness, uniqueDbName } from './harness.js';

/** Opens the harness in a new tab with a session of `dbName` on window.session. */
async function tabWithSession(page: Page, dbName: string, sessionId = 's'): Promise<void> {
  await openHarness(page);
  await page.evaluate(
    async ({ name, id }) => {
      const db = await window.tabula.openTabula({ name });
      (window as unknown as Record<string, unknown>).db = db;
      (window as unknown as Record<string, unknown>).session = await db.session(id);
    },
    { name: dbName, id: sessionId },
  );
}

test('runs of one session are exclusive across tabs, interrupt reaches the other tab, other sessions are not held up', async ({ context }) => {
  const name = uniqueDbName('runs');
  const a = await context.newPage();
  const b = await context.newPage();
  await tabWithSession(a, name);
  await tabWithSession(b, name);

  // Tab A starts a run that lasts until it is interrupted, and records when its signal fired.
  await a.evaluate(() => {
    const w = window as unknown as Record<string, unknown> & { session: { run(fn: (ctx: { signal: AbortSignal; set(k: string, v: unknown): void }) => Promise<unknown>): Promise<unknown> } };
    w.runStarted = false;
    w.runOutcome = w.session
      .run(async (ctx) => {
        w.runStarted = true;
        ctx.set('draft', 'never committed');
        await new Promise<void>((resolve) =>
          ctx.signal.addEventListener('abort', () => {
            w.abortedAt = performance.timeOrigin + performance.now();
            resolve();
          }),
        );
      })
      .then(
        () => 'resolved',
        (error: { code?: string }) => error.code ?? 'unknown',
      );
  });
  await a.waitForFunction(() => (window as unknown as { runStarted: boolean }).runStarted);

  // Tab B: refused at once with wait: false; a waiting run queues; another session runs freely.
  const busy = await b.evaluate(async () => {
    const w = window as unknown as { session: { run(fn: () => Promise<unknown>, o?: object): Promise<unknown> } };
    try {
      await w.session.run(async () => 'should not run', { wait: false });
      return 'ran';
    } catch (error) {
      return (error as { code?: string }).code;
    }
  });
  expect(busy).toBe('run/busy');

  await b.evaluate(() => {
    const w = window as unknown as Record<string, unknown> & { session: { run(fn: () => Promise<unknown>): Promise<unknown> } };
    w.waitingStartedAt = 0;
    w.waiting = w.session.run(async () => {
      w.waitingStartedAt = performance.timeOrigin + performance.now();
      // What the stored runs say when this one starts: tab A's must have ended already.
      w.runsWhenWaitingStarted = (await (w.session as unknown as { runs(): Promise<{ status: string }[]> }).runs()).map((r) => r.status);
      return 'waited';
    });
  });
  const otherSession = await b.evaluate(async () => {
    const w = window as unknown as { db: { session(id: string): Promise<{ run(fn: () => Promise<unknown>, o?: object): Promise<unknown> }> } };
    const other = await w.db.session('other');
    return other.run(async () => 'not held up', { wait: false });
  });
  expect(otherSession).toBe('not held up');
  expect(await b.evaluate(() => (window as unknown as { waitingStartedAt: number }).waitingStartedAt)).toBe(0);

  // Interrupt from tab B; A's signal fires, its run ends interrupted, then B's waiting run starts.
  // (Each page has its own clock: the order is checked on events, the times are only reported.)
  expect(await a.evaluate(() => (window as unknown as { abortedAt?: number }).abortedAt)).toBeUndefined();
  const interrupt = await b.evaluate(async () => {
    const w = window as unknown as { session: { interrupt(reason: string): Promise<boolean> } };
    const sentAt = performance.timeOrigin + performance.now();
    const delivered = await w.session.interrupt('stop from tab B');
    return { sentAt, delivered };
  });
  expect(interrupt.delivered).toBe(true);
  expect(await a.evaluate(() => (window as unknown as { runOutcome: Promise<string> }).runOutcome)).toBe('run/interrupted');
  const abortedAt = await a.evaluate(() => (window as unknown as { abortedAt: number }).abortedAt);
  test.info().annotations.push({ type: 'interrupt latency (ms)', description: (abortedAt - interrupt.sentAt).toFixed(1) });

  expect(await b.evaluate(() => (window as unknown as { waiting: Promise<string> }).waiting)).toBe('waited');
  const waitingStartedAt = await b.evaluate(() => (window as unknown as { waitingStartedAt: number }).waitingStartedAt);
  test.info().annotations.push({ type: 'queued run started after the abort (ms)', description: (waitingStartedAt - abortedAt).toFixed(1) });
  // The queued run started once tab A's run had ended (stored as interrupted), and none other was running.
  const runsWhenWaitingStarted = await b.evaluate(() => (window as unknown as { runsWhenWaitingStarted: string[] }).runsWhenWaitingStarted);
  expect(runsWhenWaitingStarted.filter((status) => status !== 'running')).toEqual(['interrupted']);
  expect(runsWhenWaitingStarted.filter((status) => status === 'running').length).toBeLessThanOrEqual(1);

  const state = await b.evaluate(async () => {
    const w = window as unknown as { session: { state(): Promise<{ context: object }>; runs(): Promise<{ status: string }[]> } };
    return { context: (await w.session.state()).context, runs: (await w.session.runs()).map((r) => r.status) };
  });
  expect(state.context).toEqual({});
  expect(state.runs).toEqual(['interrupted', 'succeeded']);
});

test('a tab crashes mid-stream: the other tab sees the message interrupted with every flushed chunk, and can run at once', async ({ context }) => {
  const name = uniqueDbName('crash');
  const a = await context.newPage();
  const b = await context.newPage();
  await tabWithSession(a, name);
  await tabWithSession(b, name);

  // Tab B records every text it sees for streaming messages.
  await b.evaluate(() => {
    const w = window as unknown as Record<string, unknown> & {
      session: { subscribe(fn: () => void): () => void; messages(): Promise<{ id: string; status: string; content: string }[]> };
    };
    w.seen = [] as { status: string; content: string }[];
    w.session.subscribe(() => {
      void w.session.messages().then((list) => {
        const last = list.at(-1);
        if (last) (w.seen as { status: string; content: string }[]).push({ status: last.status, content: last.content });
      });
    });
  });

  // Tab A streams chunks inside a run, 5 ms apart, flushing every 100 ms (the default). There are more
  // chunks than it can write before the crash however slow the machine (a minute's worth): the stream
  // must never be done when the crash comes, or there would be nothing to interrupt.
  const CHUNKS = 12_000;
  await a.evaluate((chunks) => {
    const w = window as unknown as Record<string, unknown> & {
      session: { run(fn: () => Promise<unknown>): Promise<unknown>; stream(i: { role: 'assistant' }): Promise<{ write(c: string): void; done(): Promise<unknown> }> };
    };
    void w.session.run(async () => {
      const stream = await w.session.stream({ role: 'assistant' });
      for (let i = 0; i < chunks; i++) {
        stream.write(`[${i}]`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await stream.done();
    });
  }, CHUNKS);

  // Crash A once B has seen a good part of the stream.
  await b.waitForFunction(() => {
    const seen = (window as unknown as { seen: { status: string; content: string }[] }).seen;
    return seen.some((s) => s.status === 'streaming' && s.content.includes('[40]'));
  });
  const cdp = await context.newCDPSession(a);
  void cdp.send('Page.crash').catch(() => undefined);

  await b.waitForFunction(() => (window as unknown as { seen: { status: string }[] }).seen.some((s) => s.status === 'interrupted'), undefined, { timeout: 30_000 });
  const result = await b.evaluate(async () => {
    const w = window as unknown as {
      seen: { status: string; content: string }[];
      session: { messages(): Promise<{ status: string; content: string }[]>; run(fn: () => Promise<unknown>, o?: object): Promise<unknown>; runs(): Promise<{ status: string }[]> };
    };
    const [message] = await w.session.messages();
    const lastSeenWhileStreaming = w.seen.filter((s) => s.status === 'streaming').at(-1)?.content ?? '';
    const ranAtOnce = await w.session.run(async () => 'ran', { wait: false });
    return { message, lastSeenWhileStreaming, ranAtOnce, runs: (await w.session.runs()).map((r) => r.status) };
  });
  const chunks = Array.from({ length: CHUNKS }, (_, i) => `[${i}]`);
  const kept = result.message!.content;
  // How many whole chunks, in order, make up the kept text (0 if none does).
  let wholeChunks = 0;
  for (let k = 0, prefix = ''; k < chunks.length && prefix.length < kept.length; k++) {
    prefix += chunks[k];
    if (prefix === kept) wholeChunks = k + 1;
  }
  expect(result.message!.status).toBe('interrupted');
  expect(wholeChunks, `kept text must be whole chunks in order: ${kept.slice(-40)}`).toBeGreaterThan(40);
  expect(wholeChunks).toBeLessThan(CHUNKS);
  expect(kept.startsWith(result.lastSeenWhileStreaming)).toBe(true);
  expect(result.ranAtOnce).toBe('ran');
  expect(result.runs).toEqual(['abandoned', 'succeeded']);
});
