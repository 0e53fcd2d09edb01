/**
 * openTabula()'s defaults and surroundings, and what close() settles: the
 * database and user a bare openTabula() uses, the refusal where IndexedDB is
 * missing, problems reported to console.warn when the app passes no onError,
 * the StorageManager calls behind storage() and requestPersistence(), and a
 * stream left open at close() interrupted with its text kept.
 */
import { Dexie } from 'dexie';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isTabulaError, openTabula, type TokenCounter } from '../../../src/index.js';
import { ApproxTokenCounter } from '../../../src/core/tokens.js';
import { freshTabula, uniqueName, waitFor } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe('openTabula() defaults', () => {
  it('without options opens the database "tabula" as user "anonymous"', async () => {
    const tabula = await openTabula();
    try {
      const session = await tabula.session('defaults-probe');
      expect(session.userId).toBe('anonymous');
      expect((await indexedDB.databases()).map((info) => info.name)).toContain('tabula');
      // The same database under its explicit name, and the same user: the session is there.
      const named = await freshTabula({ name: 'tabula', userId: 'anonymous' });
      expect((await named.sessions()).map((info) => info.sessionId)).toContain('defaults-probe');
      await named.close();
      await tabula.deleteSession('defaults-probe');
    } finally {
      await tabula.close();
    }
  });

  it('refuses a bad name or userId, naming the option', async () => {
    for (const [options, named] of [
      [{ name: '' }, 'openTabula({ name })'],
      [{ name: uniqueName(), userId: '' }, 'openTabula({ userId })'],
    ] as const) {
      const error: unknown = await openTabula(options).catch((caught: unknown) => caught);
      expect(isTabulaError(error, 'argument/invalid')).toBe(true);
      expect((error as Error).message).toContain(named);
    }
  });

  it('refuses to open where IndexedDB is missing, saying how to load one in Node', async () => {
    vi.stubGlobal('indexedDB', undefined);
    const error: unknown = await openTabula({ name: uniqueName() }).catch((caught: unknown) => caught);
    expect(isTabulaError(error, 'storage/failed')).toBe(true);
    expect((error as Error).message).toMatch(/IndexedDB is not available here.*fake-indexeddb/);
  });

  it('reports to console.warn, prefixed, when the app passes no onError', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const name = uniqueName();
    const tabula = await openTabula({ name });
    // Another tab (or foreign code) posts a malformed change message: reported, not thrown.
    const foreign = new BroadcastChannel(`tabula:${name}:changes`);
    foreign.postMessage({ v: 1, userId: 42 });
    const reported = () => warn.mock.calls.find(([text]) => typeof text === 'string' && text.includes('Ignored a malformed change message'));
    await waitFor(() => reported() !== undefined);
    foreign.close();
    expect(reported()?.[0]).toMatch(/^\[tabula\] Ignored a malformed change message from another tab/);
    expect(reported()?.[1]).toBe('');
    await tabula.close();
  });

  // A browser has a Worker, where the default is the exact counter in a worker (test/browser covers it).
  it.skipIf(typeof Worker === 'function')('counts tokens with the approximate counter where no Worker exists (Node)', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'hello there, how are you today?' });
    const approx = await new ApproxTokenCounter().count(await session.messages());
    expect(await session.tokens()).toBe(approx);
    await tabula.close();
  });

  it('counts with a counter the app passed, and leaves it open: it is the app’s to close', async () => {
    const close = vi.fn();
    const count = vi.fn((messages: readonly unknown[]) => Promise.resolve(7 * messages.length));
    const counter: TokenCounter & { close(): void } = { name: 'sevens', count, close };
    const withCounter = await freshTabula({ tokenCounter: counter });
    const counted = await withCounter.session('s');
    await counted.append({ role: 'user', content: 'x' });
    expect((await counted.tokens()) % 7).toBe(0);
    expect(count).toHaveBeenCalled();
    await withCounter.close();
    expect(close).not.toHaveBeenCalled();
  });
});

describe('storage() and requestPersistence()', () => {
  it('read the StorageManager: usage, quota and whether the data is persisted', async () => {
    vi.stubGlobal('navigator', {
      storage: {
        estimate: () => Promise.resolve({ usage: 1234, quota: 99_999 }),
        persisted: () => Promise.resolve(true),
        persist: () => Promise.resolve(true),
      },
    });
    const tabula = await freshTabula();
    expect(await tabula.storage()).toEqual({ usage: 1234, quota: 99_999, persisted: true });
    expect(await tabula.requestPersistence()).toBe(true);
    await tabula.close();
  });

  it('fill in zeros and false for what a partial StorageManager leaves out', async () => {
    vi.stubGlobal('navigator', { storage: { estimate: () => Promise.resolve({}) } });
    const tabula = await freshTabula();
    expect(await tabula.storage()).toEqual({ usage: 0, quota: 0, persisted: false });
    expect(await tabula.requestPersistence()).toBe(false);
    await tabula.close();
  });

  it('a refused or failing persist() is false, not an error', async () => {
    const persist = vi.fn(() => Promise.resolve(false));
    vi.stubGlobal('navigator', { storage: { persist } });
    const tabula = await freshTabula();
    expect(await tabula.requestPersistence()).toBe(false);
    expect(persist).toHaveBeenCalledTimes(1);
    persist.mockImplementation(() => Promise.reject(new DOMException('denied', 'NotAllowedError')));
    expect(await tabula.requestPersistence()).toBe(false);
    expect(persist).toHaveBeenCalledTimes(2);
    // No estimate(): zeros, though persisted() would answer.
    expect(await tabula.storage()).toEqual({ usage: 0, quota: 0, persisted: false });
    await tabula.close();
  });
});

describe('close()', () => {
  it('interrupts a stream left open, keeping its text; the next open reads it interrupted', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    // Not flushed yet: only the abort close() runs keeps it (a crash recovery would find no text).
    stream.write('half a thought');
    await tabula.close();
    const reopened = await freshTabula({ name });
    const [message] = await (await reopened.session('s')).messages();
    expect(message).toMatchObject({ content: 'half a thought', status: 'interrupted' });
    await reopened.close();
  });

  it('called twice at once runs its steps once: both calls resolve when the one close is done', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const stream = await session.stream({ role: 'assistant' });
    stream.write('half');
    const closes = vi.spyOn(Dexie.prototype, 'close');
    await Promise.all([tabula.close(), tabula.close()]);
    // Once for the database: a second close() that ran its steps again would close it twice.
    expect(closes).toHaveBeenCalledTimes(1);
    await expect(tabula.sessions()).rejects.toMatchObject({ code: 'storage/closed' });
  });

  it('is idempotent and leaves every call refused with storage/closed', async () => {
    const tabula = await freshTabula();
    await tabula.session('s');
    await tabula.close();
    await tabula.close();
    await expect(tabula.sessions()).rejects.toMatchObject({ code: 'storage/closed' });
    await expect(tabula.deleteSession('s')).rejects.toMatchObject({ code: 'storage/closed' });
    await expect(tabula.importSession({} as never)).rejects.toMatchObject({ code: 'storage/closed' });
  });
});
