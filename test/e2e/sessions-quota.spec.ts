import { expect, test } from '@playwright/test';
import { openHarness, uniqueDbName } from './harness.js';

test('over quota: appends fail with storage/quota-exceeded, earlier data intact, and work again once lifted', async ({ page, baseURL }) => {
  await openHarness(page);
  // Chromium applies a quota override to databases opened after it, so override first, then open.
  const usage = await page.evaluate(async () => (await navigator.storage.estimate()).usage ?? 0);
  const cdp = await page.context().newCDPSession(page);
  const origin = new URL(baseURL ?? '').origin;
  await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: usage + 512 * 1024 });

  const name = uniqueDbName('quota');
  await page.evaluate(async (dbName) => {
    const db = await window.tabula.openTabula({ name: dbName });
    const session = await db.session('s');
    await session.append(Array.from({ length: 20 }, (_, i) => ({ role: 'user' as const, content: `kept ${i}` })));
    (window as unknown as { session: typeof session }).session = session;
  }, name);

  const failure = await page.evaluate(async () => {
    const w = window as unknown as { session: { append(m: unknown): Promise<unknown> } };
    // Random text: Chromium compresses IndexedDB values, so repeated characters would hardly count.
    const noise = (chars: number) => {
      let out = '';
      // getRandomValues gives at most 64 KiB per call.
      for (let done = 0; done < chars; done += 65536) {
        out += Array.from(crypto.getRandomValues(new Uint8Array(Math.min(65536, chars - done))), (b) => String.fromCharCode(33 + (b % 90))).join('');
      }
      return out;
    };
    for (let i = 0; i < 20; i++) {
      try {
        await w.session.append({ role: 'user', content: `${i}:${noise(256 * 1024)}` });
      } catch (error) {
        const e = error as { code?: string; message?: string };
        return { code: e.code, message: e.message, attempt: i };
      }
    }
    return null;
  });
  expect(failure, 'an append over quota must fail').not.toBeNull();
  expect(failure!.code).toBe('storage/quota-exceeded');
  expect(failure!.message).toMatch(/storage quota for this site is used up\. Nothing of this write was saved/);

  const afterFailure = await page.evaluate(async () => {
    const w = window as unknown as { session: { messages(): Promise<{ content: string }[]>; messageCount(): Promise<number> } };
    const messages = await w.session.messages();
    return { count: await w.session.messageCount(), rows: messages.length, first: messages.slice(0, 20).map((m) => m.content) };
  });
  expect(afterFailure.first).toEqual(Array.from({ length: 20 }, (_, i) => `kept ${i}`));
  expect(afterFailure.rows).toBe(afterFailure.count);
  expect(afterFailure.count).toBe(20 + failure!.attempt);

  // Lifting the override restores the normal quota.
  await cdp.send('Storage.overrideQuotaForOrigin', { origin });
  const count = await page.evaluate(async () => {
    const w = window as unknown as { session: { append(m: unknown): Promise<unknown>; messageCount(): Promise<number> } };
    await w.session.append({ role: 'user', content: `after:${'y'.repeat(256 * 1024)}` });
    return w.session.messageCount();
  });
  expect(count).toBe(afterFailure.count + 1);
});
