/**
 * A session call whose storage fails says what it was doing and for which
 * session ("Could not save state (session "s" of user "u"): …"), so a log
 * line alone tells which call hit a full or broken disk; the failed write
 * leaves nothing behind. A call with nothing to write (an empty batch)
 * touches no storage, so it succeeds even then.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PrefixContext } from '../../../../src/index.js';
import { freshTabula } from '../helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

const label = '(session "s" of user "anonymous")';

/**
 * Makes every write fail as a full disk does, until the mocks are restored: the requests are taken, and
 * the transaction aborts once the first of them is done (a browser reports a full origin on the
 * transaction, after the requests were issued).
 */
function failWrites(): void {
  for (const method of ['put', 'add'] as const) {
    const original = Object.getOwnPropertyDescriptor(IDBObjectStore.prototype, method)?.value as (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['put']>) => IDBRequest<IDBValidKey>;
    vi.spyOn(IDBObjectStore.prototype, method).mockImplementation(function (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['put']>) {
      const request = original.apply(this, args);
      const { transaction } = this;
      request.addEventListener('success', () => transaction.abort());
      return request;
    });
  }
}

/** Makes every read through an index (a session's messages, notes, runs, checkpoints) fail as a broken disk does. */
function breakIndexReads(): void {
  const broken = () => {
    throw new DOMException('The read failed.', 'UnknownError');
  };
  vi.spyOn(IDBIndex.prototype, 'getAll').mockImplementation(broken);
  vi.spyOn(IDBIndex.prototype, 'openCursor').mockImplementation(broken);
}

describe('a session write on a full disk', () => {
  it('fails with storage/failed naming the write and the session, and changes nothing', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'kept' });
    await session.journal.record('entry');
    const checkpoint = await session.checkpoint('start');
    const before = await session.export();

    failWrites();
    const writes: [string, () => Promise<unknown>][] = [
      ['append 2 message(s)', () => session.append([{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }])],
      ['set the prefix', () => session.setPrefix(new PrefixContext({ systemPrompt: 'p' }))],
      ['record journal entries', () => session.journal.record('more')],
      ['commit the journal', () => session.journal.markCommitted()],
      ['save state', () => session.save({ summary: 'x' })],
      ['clear the context', () => session.clearContext()],
      ['create a checkpoint', () => session.checkpoint('again')],
      ['restore a checkpoint', () => session.restore(checkpoint.id)],
    ];
    for (const [what, write] of writes) {
      await expect(write(), what).rejects.toMatchObject({
        code: 'storage/failed',
        message: expect.stringContaining(`Could not ${what} ${label}:`) as string,
      });
    }
    vi.restoreAllMocks();

    const after = await session.export();
    expect(after).toEqual(before);
    expect(await session.checkpoints()).toEqual([checkpoint]);
    await tabula.close();
  });

  it('an empty append or journal batch writes nothing, so it succeeds even on a broken disk or a deleted session', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    failWrites();
    expect(await session.append([])).toEqual([]);
    await expect(session.journal.apply([])).resolves.toBeUndefined();
    // The same broken disk fails a call that has something to write.
    await expect(session.journal.record('x')).rejects.toMatchObject({ code: 'storage/failed' });
    vi.restoreAllMocks();
    expect(await session.messageCount()).toBe(0);
    expect(await session.journal.view()).toEqual([]);
    // Nor does it check the session: on one another handle deleted, there is nothing to refuse.
    await tabula.deleteSession('s');
    expect(await session.append([])).toEqual([]);
    await expect(session.journal.apply([])).resolves.toBeUndefined();
    await expect(session.append({ role: 'user', content: 'x' })).rejects.toMatchObject({ code: 'session/not-found' });
    await tabula.close();
  });
});

describe('a session read on a broken disk', () => {
  it('fails with storage/failed naming the read and the session', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.note('a note');
    await session.checkpoint();
    breakIndexReads();
    const reads: [string, () => Promise<unknown>][] = [
      ['read notes', () => session.notes()],
      ['list runs', () => session.runs()],
      ['list checkpoints', () => session.checkpoints()],
      ['export', () => session.export()],
    ];
    for (const [what, read] of reads) {
      await expect(read(), what).rejects.toMatchObject({
        code: 'storage/failed',
        message: expect.stringMatching(new RegExp(`^Could not ${what} \\(?session "s" of user "anonymous"\\)?: `)) as string,
      });
    }
    vi.restoreAllMocks();
    expect((await session.notes()).map((n) => n.text)).toEqual(['a note']);
    await tabula.close();
  });
});
