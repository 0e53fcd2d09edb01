/**
 * The class of "a stored row used before it is validated": a session row with any one field corrupt
 * (any junk the row schema refuses) makes every write to that session — local, through a handle opened
 * before the corruption, or pulled from sync through applyOps — reject with `schema/invalid` naming the
 * row, and none of it lands. A write built on an unvalidated row failed with a raw TypeError (a sync pull
 * onto `tokenTotals: null`), or could write a row built on junk.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTabulaError, openTabula } from '../../../src/index.js';
import { ApproxTokenCounter, PrefixContext, type Op } from '../../../src/core/index.js';
import { applyOps } from '../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../src/store/db/schema.js';
import { checkRow, type SessionRow } from '../../../src/store/db/rows.js';
import { fcParams } from '../seed.js';
import { append, at, create, memorySet, prefix, replica, save, SESSION, USER } from './replicas.js';

/** Junk of every JSON-ish shape, and a few that are not JSON at all. */
const junkArb = fc.oneof(
  fc.constantFrom(null, undefined, true, -1, 1.5, Number.NaN, '', 'x', [], {}),
  fc.anything({ maxDepth: 2 }),
);

/** A sync pull of each kind of op, made after the session's ops so far. */
const pulls: Op[][] = [
  [append(at(10), 'pulled')],
  [append(at(10), 'pulled'), append(at(11), 'pulled-too')],
  [prefix(at(10), 'pulled prompt')],
  [save(at(10), 1, { summary: 'pulled' })],
  [memorySet(at(10), 'pulled', 1)],
];

const writes = ['append', 'save', 'note', 'setPrefix', 'memory'] as const;

describe('a corrupt session row', () => {
  it('refuses every write to its session by name, local or pulled, and nothing of them lands', async () => {
    const { name } = await replica([create(at(1)), append(at(2), 'first')]);
    const tabula = await openTabula({ name, userId: USER, tokenCounter: new ApproxTokenCounter(), onError: () => undefined });
    // Opened while the row is sound: the handle and its Tabula know the row from before the corruption.
    const session = await tabula.session(SESSION);
    const db = createDb(name);
    const sound = (await db.sessions.get([USER, SESSION]))!;
    // The key's own fields cannot be corrupt: IndexedDB refuses such a row.
    const fields = (Object.keys(sound) as (keyof SessionRow)[]).filter((field) => field !== 'userId' && field !== 'sessionId');
    try {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...fields), junkArb, fc.constantFrom(...writes), fc.constantFrom(...pulls), async (field, junk, write, pull) => {
          const corrupt = { ...sound, [field]: junk };
          let refusedBySchema = false;
          try {
            checkRow('sessions', [USER, SESSION], corrupt);
          } catch {
            refusedBySchema = true;
          }
          fc.pre(refusedBySchema);
          await db.sessions.put(corrupt);
          const stored = await db.sessions.get([USER, SESSION]);
          const local = {
            append: () => session.append({ role: 'user', content: 'local' }),
            save: () => session.save({ summary: 'local' }),
            note: () => session.note('local'),
            setPrefix: () => session.setPrefix(new PrefixContext({ systemPrompt: 'local' })),
            memory: () => session.memory('m').set('local', 1),
          }[write];
          const outcomes = [
            await local().then(() => null, (error: unknown) => error),
            await db.transaction('rw', sessionTables(db), async () => applyOps(db, pull)).then(() => null, (error: unknown) => error),
          ];
          for (const outcome of outcomes) {
            expect(isTabulaError(outcome, 'schema/invalid'), `${field} = ${fc.stringify(junk)}, ${write}: ${String(outcome)}`).toBe(true);
            expect((outcome as Error).message).toMatch(/^Row \["u","s"\] of IndexedDB table "sessions" is corrupt/);
          }
          // Nothing landed: the messages, memory, notes and the row are as they were.
          expect((await db.messages.toArray()).map((row) => row.id)).toEqual(['first']);
          expect(await db.memory.count()).toBe(0);
          expect(await db.notes.count()).toBe(0);
          expect(await db.sessions.get([USER, SESSION])).toEqual(stored);
          await db.sessions.put(sound);
        }),
        fcParams(40),
      );
    } finally {
      db.close();
      await tabula.close();
    }
  });
});
