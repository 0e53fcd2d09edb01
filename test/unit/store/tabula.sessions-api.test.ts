/**
 * The Tabula object's session calls through the public API, field by field:
 * what sessions() reports of each session (and that the rows are frozen),
 * the user deleteSession() and sessions() act for, an import that brings a
 * blackboard, a listener of tabula.subscribe() checked up front, and two
 * instances on one database (two tabs) opening, deleting and re-creating one
 * session.
 */
import { describe, expect, it } from 'vitest';
import { isTabulaError, type SessionExport } from '../../../src/index.js';
import { freshTabula, waitFor } from './helpers.js';

/** The names of the board databases this browser holds for database `name`. */
async function boardDatabases(name: string): Promise<string[]> {
  const all = await indexedDB.databases();
  return all.map((db) => db.name ?? '').filter((db) => db.startsWith(`${encodeURIComponent(name)}:`) && db.endsWith(':blackboard'));
}

describe('tabula.sessions()', () => {
  it('reports each session’s fields as stored: version, count, summary, times, fork', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const before = Date.now();
    const source = await tabula.session('source');
    await source.append([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'a' },
    ]);
    await source.save({ summary: 'a short talk' });
    const fork = await source.fork('copy');
    await fork.append({ role: 'user', content: 'more' });
    const after = Date.now();

    const list = await tabula.sessions();
    expect(list.map((info) => info.sessionId)).toEqual(['copy', 'source']);
    const [copy, original] = list;
    expect(original).toEqual({
      userId: 'alice',
      sessionId: 'source',
      version: 1,
      messageCount: 2,
      summary: 'a short talk',
      createdAt: expect.any(Number) as number,
      updatedAt: expect.any(Number) as number,
      forkOf: null,
    });
    expect(copy).toMatchObject({ userId: 'alice', sessionId: 'copy', messageCount: 3, forkOf: { userId: 'alice', sessionId: 'source' } });
    for (const info of list) {
      expect(info.createdAt).toBeGreaterThanOrEqual(before);
      expect(info.updatedAt).toBeGreaterThanOrEqual(info.createdAt);
      expect(info.updatedAt).toBeLessThanOrEqual(after);
      expect(Object.isFrozen(info)).toBe(true);
    }
    await tabula.close();
  });

  it('lists the user it is asked for, and the Tabula’s own user otherwise; refuses a bad query', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    await tabula.session('mine');
    await tabula.session('theirs', { userId: 'bob' });
    expect((await tabula.sessions()).map((info) => [info.userId, info.sessionId])).toEqual([['alice', 'mine']]);
    expect((await tabula.sessions({})).map((info) => info.sessionId)).toEqual(['mine']);
    expect((await tabula.sessions({ userId: 'bob' })).map((info) => [info.userId, info.sessionId])).toEqual([['bob', 'theirs']]);
    expect(await tabula.sessions({ userId: 'nobody' })).toEqual([]);
    const error: unknown = await tabula.sessions({ userId: '' }).catch((caught: unknown) => caught);
    expect(isTabulaError(error, 'argument/invalid')).toBe(true);
    expect((error as Error).message).toContain('sessions({ userId })');
    await expect(tabula.sessions('alice' as never)).rejects.toMatchObject({ code: 'argument/invalid' });
    await tabula.close();
  });
});

describe('tabula.deleteSession()', () => {
  it('deletes the session of the user it is asked for, and only that one', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    await (await tabula.session('s')).append({ role: 'user', content: 'alice’s' });
    await (await tabula.session('s', { userId: 'bob' })).append({ role: 'user', content: 'bob’s' });
    await tabula.deleteSession('s', { userId: 'bob' });
    expect(await tabula.sessions({ userId: 'bob' })).toEqual([]);
    expect((await tabula.sessions()).map((info) => info.messageCount)).toEqual([1]);
    await tabula.deleteSession('s');
    expect(await tabula.sessions()).toEqual([]);
    // Deleting what is not there is no error, and no change: nothing is announced.
    const heard: string[] = [];
    const stop = tabula.subscribe((change) => heard.push(`${change.sessionId}:${change.kinds.join()}`));
    await tabula.deleteSession('never-was');
    await tabula.session('after');
    expect(heard).toEqual(['after:session.create']);
    stop();
    const error: unknown = await tabula.deleteSession('s', { userId: '' }).catch((caught: unknown) => caught);
    expect(isTabulaError(error, 'argument/invalid')).toBe(true);
    expect((error as Error).message).toContain('deleteSession({ userId })');
    await tabula.close();
  });

  it('removes the session’s blackboard and its database: a session created again starts with an empty board', async () => {
    const tabula = await freshTabula();
    const board = (await tabula.session('s')).blackboard;
    await board.whenLoaded;
    board.set('plan', 'old');
    await board.flushed();
    expect(await boardDatabases(tabula.dbName)).toHaveLength(1);
    await tabula.deleteSession('s');
    expect(await boardDatabases(tabula.dbName)).toEqual([]);
    const again = (await tabula.session('s')).blackboard;
    await again.whenLoaded;
    expect(again.toJSON()).toEqual({});
    await tabula.close();
  });
});

describe('tabula.importSession()', () => {
  it('brings the exported blackboard along, readable from the returned handle and from a fresh open', async () => {
    const source = await freshTabula({ userId: 'alice' });
    const original = await source.session('with-board');
    await original.append({ role: 'user', content: 'hi' });
    await original.blackboard.whenLoaded;
    original.blackboard.set('plan', { steps: ['a', 'b'] });
    await original.blackboard.flushed();
    const data = JSON.parse(JSON.stringify(await original.export())) as SessionExport;
    await source.close();

    const target = await freshTabula({ userId: 'carol' });
    const imported = await target.importSession(data);
    expect([imported.userId, imported.sessionId]).toEqual(['carol', 'with-board']);
    expect(imported.blackboard.toJSON()).toEqual({ plan: { steps: ['a', 'b'] } });
    expect((await imported.messages()).map((m) => m.content)).toEqual(['hi']);
    await target.close();
    const reopened = await freshTabula({ name: target.dbName, userId: 'carol' });
    const board = (await reopened.session('with-board')).blackboard;
    await board.whenLoaded;
    expect(board.toJSON()).toEqual({ plan: { steps: ['a', 'b'] } });
    await reopened.close();
  });

  it('imports an export of a session that never used its board, with an empty board', async () => {
    const source = await freshTabula();
    const original = await source.session('no-board');
    await original.append({ role: 'user', content: 'hi' });
    const data = JSON.parse(JSON.stringify(await original.export())) as SessionExport;
    await source.close();
    // A file may leave the board out altogether (written by hand, or by an older version).
    const { blackboard: _unused, ...withoutBoard } = data;
    const target = await freshTabula();
    const imported = await target.importSession(withoutBoard);
    expect((await imported.messages()).map((m) => m.content)).toEqual(['hi']);
    await imported.blackboard.whenLoaded;
    expect(imported.blackboard.toJSON()).toEqual({});
    await target.close();
  });

  it('refuses an id that exists, naming the session and the user, and changes nothing', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'kept' });
    const data = await session.export();
    const error: unknown = await tabula.importSession({ ...data, messages: [] }).catch((caught: unknown) => caught);
    expect(isTabulaError(error, 'session/exists')).toBe(true);
    expect((error as Error).message).toContain('Session "s" of user "alice" already exists');
    expect((await session.messages()).map((m) => m.content)).toEqual(['kept']);
    await tabula.close();
  });
});

describe('tabula.subscribe()', () => {
  it('refuses a listener that is not a function, naming what it got', async () => {
    const tabula = await freshTabula();
    const error: unknown = (() => {
      try {
        tabula.subscribe('listener' as never);
        return null;
      } catch (caught) {
        return caught;
      }
    })();
    expect(isTabulaError(error, 'argument/invalid')).toBe(true);
    expect((error as Error).message).toMatch(/tabula\.subscribe\(listener\) takes a function, got/);
    await tabula.close();
  });
});

describe('two instances on one database (two tabs)', () => {
  it('a session one tab deletes and the other re-creates is one new, empty session for both', async () => {
    const a = await freshTabula();
    const b = await freshTabula({ name: a.dbName });
    const inA = await a.session('s');
    await inA.append({ role: 'user', content: 'first life' });
    const inB = await b.session('s');
    expect(await inB.messageCount()).toBe(1);
    await a.deleteSession('s');
    await expect(inB.messageCount()).rejects.toMatchObject({ code: 'session/not-found' });
    const again = await b.session('s');
    await again.append({ role: 'user', content: 'second life' });
    expect((await (await a.session('s')).messages()).map((m) => m.content)).toEqual(['second life']);
    await Promise.all([a.close(), b.close()]);
  });

  it('appends from both tabs to one session all land, in the order written', async () => {
    const a = await freshTabula();
    const b = await freshTabula({ name: a.dbName });
    const inA = await a.session('s');
    const inB = await b.session('s');
    const heardInA: string[] = [];
    a.subscribe((change) => heardInA.push(change.origin));
    for (let i = 0; i < 3; i += 1) {
      await inA.append({ role: 'user', content: `a${i}` });
      await inB.append({ role: 'assistant', content: `b${i}` });
    }
    await waitFor(() => heardInA.filter((origin) => origin === 'tab').length === 3);
    expect((await inA.messages()).map((m) => m.content)).toEqual(['a0', 'b0', 'a1', 'b1', 'a2', 'b2']);
    expect(await inA.messageCount()).toBe(6);
    expect((await a.sessions())[0]?.messageCount).toBe(6);
    await Promise.all([a.close(), b.close()]);
  });
});
