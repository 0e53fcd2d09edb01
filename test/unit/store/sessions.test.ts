import { describe, expect, it } from 'vitest';
import { isTabulaError, openTabula } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { tombstoneKey } from '../../../src/store/db/keys.js';
import { freshTabula, uniqueName } from './helpers.js';

describe('openTabula and sessions', () => {
  it('opens or creates a session keyed by (userId, sessionId)', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const a = await tabula.session('chat-1');
    expect([a.userId, a.sessionId]).toEqual(['alice', 'chat-1']);
    await a.append({ role: 'user', content: 'hi' });
    const again = await tabula.session('chat-1');
    expect(await again.messageCount()).toBe(1);
    const bobs = await tabula.session('chat-1', { userId: 'bob' });
    expect(await bobs.messageCount()).toBe(0);
    await tabula.close();
  });

  it('lists one user’s sessions, newest first, and never another user’s', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const first = await tabula.session('first');
    await tabula.session('second');
    await tabula.session('bobs', { userId: 'bob' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await first.append({ role: 'user', content: 'bump' });
    const list = await tabula.sessions();
    expect(list.map((s) => s.sessionId)).toEqual(['first', 'second']);
    expect(list[0]).toMatchObject({ userId: 'alice', messageCount: 1, version: 0, forkOf: null, summary: null });
    expect((await tabula.sessions({ userId: 'bob' })).map((s) => s.sessionId)).toEqual(['bobs']);
    await tabula.close();
  });

  it('keeps everything across close and reopen', async () => {
    const name = uniqueName();
    const first = await freshTabula({ name });
    const session = await first.session('s');
    await session.append([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }]);
    await session.save({ summary: 'short' });
    await session.journal.record({ did: 'x' });
    await session.journal.markCommitted();
    await session.journal.record({ did: 'y' });
    await session.note('step 1');
    await session.memory().set('k', { v: 1 });
    await first.close();

    const second = await freshTabula({ name });
    const reopened = await second.session('s');
    expect((await reopened.messages()).map((m) => m.content)).toEqual(['q', 'a']);
    expect((await reopened.state()).summary).toBe('short');
    expect(await reopened.journal.view()).toEqual([{ did: 'x' }, { did: 'y' }]);
    expect(await reopened.journal.diff()).toEqual([{ did: 'y' }]);
    expect((await reopened.notes()).map((n) => n.text)).toEqual(['step 1']);
    expect(await reopened.memory().get('k')).toEqual({ v: 1 });
    await second.close();
  });

  it('deletes a session and everything kept with it', async () => {
    const tabula = await freshTabula();
    const s = await tabula.session('doomed');
    await s.append({ role: 'user', content: 'x' });
    await s.memory().set('k', 1);
    await s.note('n');
    await s.checkpoint('c');
    const kept = await tabula.session('kept');
    await kept.append({ role: 'user', content: 'stay' });
    await tabula.deleteSession('doomed');
    expect((await tabula.sessions()).map((i) => i.sessionId)).toEqual(['kept']);
    await expect(s.messages()).resolves.toEqual([]);
    await expect(s.messageCount()).rejects.toMatchObject({ code: 'session/not-found' });
    await expect(s.append({ role: 'user', content: 'late' })).rejects.toMatchObject({ code: 'session/not-found' });
    const recreated = await tabula.session('doomed');
    expect(await recreated.memory().keys()).toEqual([]);
    expect(await recreated.notes()).toEqual([]);
    expect(await recreated.checkpoints()).toEqual([]);
    expect(await kept.messageCount()).toBe(1);
    await tabula.close();
  });

  it('refuses bad ids with a clear error', async () => {
    const tabula = await freshTabula();
    await expect(tabula.session('')).rejects.toThrow(/session\(sessionId\) must be a string of 1–256 characters/);
    await expect(tabula.session('x', { userId: 'u'.repeat(300) })).rejects.toMatchObject({ code: 'argument/invalid' });
    await tabula.close();
  });

  it.runIf(typeof navigator === 'undefined' || !('storage' in navigator))('reports storage as zeros where the StorageManager API is missing (Node)', async () => {
    const tabula = await freshTabula();
    const storage = await tabula.storage();
    expect(storage).toEqual({ usage: 0, quota: 0, persisted: false });
    expect(await tabula.requestPersistence()).toBe(false);
    await tabula.close();
  });

  it('throws storage/closed after close(), for the Tabula and its sessions', async () => {
    const tabula = await openTabula({ name: uniqueName() });
    const s = await tabula.session('s');
    await tabula.close();
    await tabula.close();
    await expect(tabula.session('s')).rejects.toMatchObject({ code: 'storage/closed' });
    await expect(s.append({ role: 'user', content: 'x' })).rejects.toMatchObject({ code: 'storage/closed' });
    try {
      s.memory();
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'storage/closed')).toBe(true);
    }
  });

  it('closing one session handle leaves others working', async () => {
    const tabula = await freshTabula();
    const a = await tabula.session('s');
    const b = await tabula.session('s');
    await a.close();
    await expect(a.messages()).rejects.toMatchObject({ code: 'storage/closed' });
    await b.append({ role: 'user', content: 'still here' });
    expect(await b.messageCount()).toBe(1);
    await tabula.close();
  });

  it('an id that is not valid Unicode is refused before anything is written (issue 10 #12)', async () => {
    const tabula = await freshTabula();
    for (const bad of ['\ud800', 'a\udc00b', '']) {
      await expect(tabula.session(bad)).rejects.toMatchObject({ code: 'argument/invalid' });
      await expect(tabula.session('ok', { userId: bad })).rejects.toMatchObject({ code: 'argument/invalid' });
    }
    await expect(tabula.session('x'.repeat(257))).rejects.toMatchObject({ code: 'argument/invalid' });
    const longest = await tabula.session('x'.repeat(256));
    await longest.memory('m'.repeat(128)).set('k', 1);
    expect(() => longest.memory('\ud800')).toThrow(expect.objectContaining({ code: 'argument/invalid' }) as Error);
    expect((await tabula.sessions()).map((s) => s.sessionId)).toEqual(['x'.repeat(256)]);
    await tabula.deleteSession('x'.repeat(256));
    expect(await tabula.sessions()).toEqual([]);
    await tabula.close();
  });

  it('an import or a fork into an id whose delete is ordered ahead of this tab’s clock lands too (issue 10 #7)', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    const source = await tabula.session('source');
    await source.append({ role: 'user', content: 'kept' });
    const file = await source.export();
    const raw = createDb(name);
    for (const id of ['imported', 'forked']) await raw.meta.put({ key: tombstoneKey('anonymous', id), value: '009999999999999.000000.skewedtab' });
    raw.close();
    const imported = await tabula.importSession({ ...file, sessionId: 'imported' });
    const forked = await source.fork('forked');
    for (const copy of [imported, forked]) {
      await copy.append({ role: 'user', content: 'more' });
      expect((await copy.messages()).map((m) => m.content)).toEqual(['kept', 'more']);
    }
    expect((await tabula.sessions()).map((s) => s.sessionId).sort()).toEqual(['forked', 'imported', 'source']);
    await tabula.close();
  });

  it('re-creating a session whose delete is ordered ahead of this tab’s clock works (issue 10 #7)', async () => {
    const name = uniqueName();
    const tabula = await freshTabula({ name });
    await (await tabula.session('s')).append({ role: 'user', content: 'old life' });
    await tabula.deleteSession('s');
    // A tab whose clock runs years ahead deleted it again: its tombstone is far ahead of ours.
    const raw = createDb(name);
    await raw.meta.put({ key: tombstoneKey('anonymous', 's'), value: '009999999999999.000000.skewedtab' });
    raw.close();
    const again = await tabula.session('s');
    await again.append({ role: 'user', content: 'new life' });
    expect((await again.messages()).map((m) => m.content)).toEqual(['new life']);
    expect((await tabula.sessions()).map((s) => s.sessionId)).toEqual(['s']);
    const reopened = await freshTabula({ name });
    expect((await (await reopened.session('s')).messages()).map((m) => m.content)).toEqual(['new life']);
    await reopened.close();
    await tabula.close();
  });
});

