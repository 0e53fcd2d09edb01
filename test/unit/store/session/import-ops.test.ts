/**
 * importSession() (and fork) rewrite an export into ops: each part of the
 * prefix alone is enough to bring the prefix across; the ops written are
 * only those the data needs (every op is queued for sync and replayed on
 * every replica); messages land in the order of their keys, whatever the
 * order of the file's array.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { PrefixContext, type SessionExport, type Tabula } from '../../../../src/index.js';
import { freshTabula } from '../helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});
async function open(): Promise<Tabula> {
  const tabula = await freshTabula({ userId: 'alice' });
  opened.push(tabula);
  return tabula;
}

/** The export of a session that `fill` wrote, as a file would carry it. */
async function exported(fill: (session: Awaited<ReturnType<Tabula['session']>>) => Promise<void> = async () => undefined): Promise<SessionExport> {
  const session = await (await open()).session('source');
  await fill(session);
  return JSON.parse(JSON.stringify(await session.export())) as SessionExport;
}

/** Imports `data` into a fresh database and returns the kinds of op the import wrote, and the imported session. */
async function imported(data: SessionExport) {
  const target = await open();
  const kinds: string[] = [];
  target.subscribe((change) => kinds.push(...change.kinds));
  const session = await target.importSession(data);
  return { session, kinds: [...new Set(kinds)].sort() };
}

describe('importSession() of each part of a prefix alone', () => {
  const parts: [string, ConstructorParameters<typeof PrefixContext>[0]][] = [
    ['a system prompt', { systemPrompt: 'Be brief.' }],
    ['grounding', { grounding: [{ role: 'user', content: 'the doc' }] }],
    ['a schema block', { schemaBlock: '{"type":"object"}' }],
  ];
  for (const [part, init] of parts) {
    it(`brings ${part} across`, async () => {
      const prefix = new PrefixContext(init);
      const { session, kinds } = await imported(await exported((source) => source.setPrefix(prefix)));
      expect((await session.prefix()).equals(prefix)).toBe(true);
      expect(kinds).toContain('prefix.set');
    });
  }
});

describe('the ops an import writes', () => {
  it('for an empty session: only its creation', async () => {
    const { session, kinds } = await imported(await exported());
    expect(kinds).toEqual(['session.create']);
    expect((await session.prefix()).equals(new PrefixContext())).toBe(true);
    expect(await session.state()).toMatchObject({ version: 0, summary: null });
    expect(await session.journal.view()).toEqual([]);
  });

  it('a journal none of which was committed: its entries, and no commit', async () => {
    const { session, kinds } = await imported(await exported((source) => source.journal.apply(['a', 'b'])));
    expect(kinds).toEqual(['journal.append', 'session.create']);
    expect(await session.journal.diff()).toEqual(['a', 'b']);
  });

  it('a saved state, a committed journal: each with its own op', async () => {
    const data = await exported(async (source) => {
      await source.save({ summary: 's' });
      await source.journal.apply(['a', 'b']);
      await source.journal.markCommitted();
    });
    const { session, kinds } = await imported(data);
    expect(kinds).toEqual(['journal.append', 'journal.commit', 'session.create', 'state.save']);
    expect(await session.state()).toMatchObject({ version: 1, summary: 's' });
    expect(await session.journal.diff()).toEqual([]);
    expect(await session.journal.view()).toEqual(['a', 'b']);
  });
});

describe('the messages of an import', () => {
  it('land in the order of their keys, whatever the order of the array', async () => {
    const data = await exported((source) =>
      source.append(['one', 'two', 'three', 'four', 'five'].map((content) => ({ role: 'user' as const, content }))).then(() => undefined),
    );
    const shuffled = [data.messages[3]!, data.messages[0]!, data.messages[4]!, data.messages[2]!, data.messages[1]!];
    const { session } = await imported({ ...data, messages: shuffled });
    expect((await session.messages()).map((m) => m.content)).toEqual(['one', 'two', 'three', 'four', 'five']);
    // …and keep their ids, so a message is the same message in both databases.
    expect((await session.messages()).map((m) => m.id)).toEqual(data.messages.map((m) => m.id));
  });
});

describe('messages of an import that share an order key (a file written by hand or by another tool)', () => {
  it('keep the order of the array among themselves', async () => {
    const data = await exported((source) =>
      source.append(['a', 'b', 'c', 'd', 'e', 'f'].map((content) => ({ role: 'user' as const, content }))).then(() => undefined),
    );
    // Two runs of ties, listed against the order of their ids' keys: the file's order is the only order there is.
    const byContent = (content: string) => data.messages.find((m) => m.message.content === content)!;
    const tie = (content: string, orderOf: string) => ({ ...byContent(content), order: byContent(orderOf).order });
    const tied = [tie('c', 'a'), tie('a', 'a'), tie('b', 'a'), tie('f', 'd'), tie('e', 'd'), tie('d', 'd')];
    const { session } = await imported({ ...data, messages: tied });
    expect((await session.messages()).map((m) => m.content)).toEqual(['c', 'a', 'b', 'f', 'e', 'd']);
  });
});
