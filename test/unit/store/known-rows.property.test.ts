/**
 * An append builds on the session row this Tabula last saw committed and
 * sends the message add and the row write with the read that checks the
 * row (src/store/known-rows.ts, commit in writer.ts). The class of bug this
 * guards: a write built on a stale row that lands anyway (a lost count, a
 * message ordered before another tab's, a deleted session brought back) or
 * half of one (a message without its count, or the count without the
 * message). Two Tabula instances on one database act as two tabs; random
 * appends (some racing), clears, removals, deletes with re-creation and
 * token counts (which write the row outside the op path) from both, and
 * after each step both tabs read the same messages, in append order, each
 * once, and a count equal to them.
 * Seeded: the seed is printed; TABULA_SEED=<n> replays it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTabulaError, type Session } from '../../../src/index.js';
import { formatHlc } from '../../../src/core/hlc.js';
import { createDb, sessionRange } from '../../../src/store/db/schema.js';
import { fcParams, testSeed } from '../seed.js';
import { freshTabula, uniqueName } from './helpers.js';

type Tab = 0 | 1;
type Command =
  | { kind: 'append'; tab: Tab; count: number }
  | { kind: 'race'; counts: [number, number] }
  | { kind: 'clear'; tab: Tab }
  | { kind: 'remove'; tab: Tab; pick: number }
  | { kind: 'recreate'; tab: Tab }
  | { kind: 'tokens'; tab: Tab };

const tabArb = fc.constantFrom(0 as const, 1 as const);
const countArb = fc.integer({ min: 1, max: 3 });
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('append' as const), tab: tabArb, count: countArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('race' as const), counts: fc.tuple(countArb, countArb) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), tab: tabArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), tab: tabArb, pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('recreate' as const), tab: tabArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tokens' as const), tab: tabArb }) },
);

/**
 * A Tabula that knows session 's' (one message appended), and another writer of its database whose
 * changes send no announcement: this Tabula still knows the row when the other writer changes it.
 */
async function knownRowAndOtherWriter() {
  const name = uniqueName('known-rows');
  const tabula = await freshTabula({ name });
  const other = createDb(name);
  const session = await tabula.session('s');
  await session.append({ role: 'user', content: 'known' });
  return { tabula, other, session };
}

const batch = (count: number, label: string) => Array.from({ length: count }, (_, k) => ({ role: 'user' as const, content: `${label}.${k}` }));

describe('appends built on a known session row', () => {
  it('two tabs: every message lands once, in append order, counted; nothing of a refused or stale attempt stays', { timeout: 300_000 }, async () => {
    testSeed('known rows');
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 14 }), async (commands) => {
        const name = uniqueName('known-rows');
        const tabs = [await freshTabula({ name }), await freshTabula({ name })] as const;
        const handles: [Session, Session] = [await tabs[0].session('s'), await tabs[1].session('s')];
        // A handle from before the other tab deleted and re-created the session: it writes nothing into the new life.
        const stale = [false, false];
        // The model: message contents in the order the session must hold them.
        let model: string[] = [];
        let label = 0;
        /** Before a tab writes: a stale handle of it (which may still know the deleted life's row) is refused and lands nothing; the tab opens the session again. */
        const ready = async (tab: Tab) => {
          if (!stale[tab]) return;
          await expect(handles[tab].append(batch(1, `${run}.stale`))).rejects.toMatchObject({ code: 'session/not-found' });
          handles[tab] = await tabs[tab].session('s');
          stale[tab] = false;
        };
        try {
          for (const command of commands) {
            if (command.kind === 'race') {
              await ready(0);
              await ready(1);
            } else {
              await ready(command.tab);
            }
            switch (command.kind) {
              case 'append': {
                const contents = batch(command.count, `${run}.${label++}`);
                const stored = await handles[command.tab].append(contents);
                expect(stored.map((m) => m.content)).toEqual(contents.map((m) => m.content));
                model.push(...contents.map((m) => m.content));
                break;
              }
              case 'race': {
                // Both tabs build on the row they know, and at most one of them can be right.
                const first = batch(command.counts[0], `${run}.${label++}`);
                const second = batch(command.counts[1], `${run}.${label++}`);
                await Promise.all([handles[0].append(first), handles[1].append(second)]);
                const tail = (await handles[0].messages()).slice(-(first.length + second.length)).map((m) => m.content as string);
                const a = first.map((m) => m.content);
                const b = second.map((m) => m.content);
                // Each batch stays together and in its order; which batch came first is the race's.
                expect([JSON.stringify([...a, ...b]), JSON.stringify([...b, ...a])]).toContain(JSON.stringify(tail));
                model.push(...tail);
                break;
              }
              case 'clear':
                await handles[command.tab].clearContext();
                model = [];
                break;
              case 'remove': {
                if (model.length === 0) break;
                const content = model[command.pick % model.length] as string;
                const target = (await handles[command.tab].messages()).find((m) => m.content === content);
                expect(target, `message ${content}`).toBeDefined();
                await handles[command.tab].memory().transact(async (tx) => {
                  await tx.removeMessages([target?.id as string]);
                });
                model = model.filter((c) => c !== content);
                break;
              }
              case 'recreate': {
                await tabs[command.tab].deleteSession('s');
                handles[command.tab] = await tabs[command.tab].session('s');
                model = [];
                // The other tab's handle keeps its row from the deleted life: its next append must not bring that back (see ready()).
                stale[command.tab === 0 ? 1 : 0] = true;
                break;
              }
              case 'tokens':
                await handles[command.tab].tokens();
                break;
            }
            for (const handle of handles) {
              const contents = (await handle.messages()).map((m) => m.content);
              expect(contents).toEqual(model);
              expect(await handle.messageCount()).toBe(model.length);
            }
          }
        } finally {
          run += 1;
          await tabs[0].close();
          await tabs[1].close();
        }
      }),
      fcParams(30),
    );
  });

  it('an append built on the row of a session deleted since (no change event yet) is refused, and leaves neither its message nor the row', async () => {
    const { tabula, other, session } = await knownRowAndOtherWriter();
    try {
      await other.transaction('rw', [other.sessions, other.messages], async () => {
        await other.messages.where('[userId+sessionId+order]').between(...sessionRange('anonymous', 's')).delete();
        await other.sessions.delete(['anonymous', 's']);
      });
      const error = await session.append({ role: 'user', content: 'after delete' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isTabulaError(error) && error.code).toBe('session/not-found');
      expect(await tabula.sessions()).toEqual([]);
      expect(await other.messages.count()).toBe(0);
    } finally {
      other.close();
      await tabula.close();
    }
  });

  it('an append built on a row another writer moved since (no change event yet) counts from the stored row and sorts after its order', async () => {
    const { tabula, other, session } = await knownRowAndOtherWriter();
    try {
      // As if another device, its clock an hour ahead, had written 5 messages' worth (its rows are not needed here).
      const ahead = formatHlc({ wallMs: Date.now() + 3_600_000, counter: 0, clientId: 'other' });
      await other.sessions.update(['anonymous', 's'], (row) => {
        row.lastOrder = ahead;
        row.messageCount += 5;
      });
      const [stored] = await session.append({ role: 'user', content: 'after' });
      expect(stored && stored.order > ahead).toBe(true);
      expect(await session.messageCount()).toBe(7);
    } finally {
      other.close();
      await tabula.close();
    }
  });

  it('two appends racing from two tabs on the same known row both land, counted, one after the other', async () => {
    const name = uniqueName('known-rows');
    const [a, b] = [await freshTabula({ name }), await freshTabula({ name })];
    try {
      const [x, y] = [await a.session('s'), await b.session('s')];
      for (let round = 0; round < 10; round++) {
        const [mx, my] = await Promise.all([x.append({ role: 'user', content: `a${round}` }), y.append({ role: 'user', content: `b${round}` })]);
        const last = (await x.messages({ last: 2 })).map((m) => m.id);
        expect(last.sort()).toEqual([mx[0]?.id, my[0]?.id].sort());
      }
      expect(await x.messageCount()).toBe(20);
      expect(await y.messageCount()).toBe(20);
      expect((await y.messages()).length).toBe(20);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
