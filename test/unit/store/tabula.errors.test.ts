/**
 * The errors of the Tabula object's calls name what to fix: the call and
 * argument that was wrong, the stored row that is corrupt (by its key), and
 * the step that failed when IndexedDB refused a read.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isTabulaError } from '../../../src/index.js';
import { createDb } from '../../../src/store/db/schema.js';
import { freshTabula, rawPut } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

/** The rejection of `promise` (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    () => null,
    (error: unknown) => error,
  );
  expect(outcome).toBeInstanceOf(Error);
  return outcome as Error;
}

describe('wrong arguments name the call and the argument', () => {
  it.each([
    ['session(sessionId, options)', (t: Awaited<ReturnType<typeof freshTabula>>) => t.session('s', 'alice' as never)],
    ['session({ userId })', (t: Awaited<ReturnType<typeof freshTabula>>) => t.session('s', { userId: '' })],
    ['sessions(query)', (t: Awaited<ReturnType<typeof freshTabula>>) => t.sessions('alice' as never)],
    ['deleteSession(sessionId)', (t: Awaited<ReturnType<typeof freshTabula>>) => t.deleteSession('')],
    ['deleteSession(sessionId, options)', (t: Awaited<ReturnType<typeof freshTabula>>) => t.deleteSession('s', 'alice' as never)],
  ])('%s', async (call, act) => {
    const tabula = await freshTabula();
    const error = await rejection(act(tabula));
    expect(isTabulaError(error, 'argument/invalid')).toBe(true);
    expect(error.message).toContain(call);
    await tabula.close();
  });
});

describe('a corrupt session row is named by its key', () => {
  it('by session() and by sessions(), and other sessions still list', async () => {
    const tabula = await freshTabula();
    await tabula.session('fine');
    await rawPut(tabula.dbName, 'sessions', { userId: 'anonymous', sessionId: 'broken', updatedAt: 1 });
    const opened = await rejection(tabula.session('broken'));
    expect(isTabulaError(opened, 'schema/invalid')).toBe(true);
    expect(opened.message).toContain('Row ["anonymous","broken"] of IndexedDB table "sessions"');
    const listed = await rejection(tabula.sessions());
    expect(listed.message).toContain('Row ["anonymous","broken"] of IndexedDB table "sessions"');
    await tabula.close();
  });
});

describe('a read IndexedDB refuses names the step', () => {
  it('session(): open session "<id>"', async () => {
    const tabula = await freshTabula();
    vi.spyOn(IDBObjectStore.prototype, 'get').mockImplementation(() => {
      throw new DOMException('The disk broke.', 'UnknownError');
    });
    const error = await rejection(tabula.session('s'));
    expect(isTabulaError(error, 'storage/failed')).toBe(true);
    expect(error.message).toContain('open session "s"');
    vi.restoreAllMocks();
    await tabula.close();
  });

  it('sessions(): list the sessions of user "<id>"', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    await tabula.session('s');
    const broken = () => {
      throw new DOMException('The disk broke.', 'UnknownError');
    };
    vi.spyOn(IDBIndex.prototype, 'getAll').mockImplementation(broken);
    vi.spyOn(IDBIndex.prototype, 'openCursor').mockImplementation(broken);
    const error = await rejection(tabula.sessions());
    expect(isTabulaError(error, 'storage/failed')).toBe(true);
    expect(error.message).toContain('list the sessions of user "alice"');
    vi.restoreAllMocks();
    await tabula.close();
  });

  it('session() of a session with a run left by a gone tab, when storage is full: recover session "<id>"', async () => {
    const tabula = await freshTabula();
    await tabula.session('s');
    const raw = createDb(tabula.dbName);
    await raw.runs.put({ runId: 'orphan', userId: 'anonymous', sessionId: 's', scope: 'default', visit: 1, attempt: 1, status: 'running', startedAt: 1, endedAt: null });
    raw.close();
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(() => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    });
    const error = await rejection(tabula.session('s'));
    expect(isTabulaError(error, 'storage/quota-exceeded')).toBe(true);
    expect(error.message).toContain('Could not recover session "s"');
    vi.restoreAllMocks();
    // Once there is room, the next open marks the run abandoned.
    expect((await (await tabula.session('s')).runs()).map((run) => run.status)).toEqual(['abandoned']);
    await tabula.close();
  });
});
