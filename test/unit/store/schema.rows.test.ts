/**
 * The parts of schema.ts other modules build on: the meta keys of a session
 * (tombstones, removed-message tombstones, update registers) that store/apply/
 * deletes by prefix, the life of a session row, the range of a user's session
 * rows, the error of a corrupt row (with zod's issues), and the database
 * createDb opens without Dexie's observability layer.
 */
import { Dexie } from 'dexie';
import { describe, expect, it } from 'vitest';
import { isTabulaError } from '../../../src/index.js';
import {
  createDb,
  lifeOf,
  messageUpdatesKey,
  messageUpdatesPrefix,
  removedMessageKey,
  removedMessagePrefix,
  tombstoneKey,
  userSessionRows,
  type SessionRow,
} from '../../../src/store/schema.js';
import { corruptMessage, freshTabula, uniqueName } from './helpers.js';

/** Sessions whose ids would run together if a key joined them naively (a prefix of another, separators, quotes). */
const SESSIONS: Array<[string, string]> = [
  ['u', 's'],
  ['u', 's1'],
  ['u', 's:1'],
  ['u1', 's'],
  ['u', ''],
  ['', 'u'],
  ['u"', 's'],
  ['u', '"s'],
  ['u:s', ''],
];

describe('meta keys of a session', () => {
  it('name each session apart, each kind apart, and each message apart', () => {
    const keys = SESSIONS.flatMap(([userId, sessionId]) => [
      tombstoneKey(userId, sessionId),
      removedMessagePrefix(userId, sessionId),
      messageUpdatesPrefix(userId, sessionId),
      removedMessageKey(userId, sessionId, 'm1'),
      removedMessageKey(userId, sessionId, 'm2'),
      messageUpdatesKey(userId, sessionId, 'm1'),
      messageUpdatesKey(userId, sessionId, 'm2'),
    ]);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("hold a session's message keys under its prefixes, and no other session's (apply deletes them by prefix)", () => {
    for (const [userId, sessionId] of SESSIONS) {
      for (const [otherUser, otherSession] of SESSIONS) {
        const same = userId === otherUser && sessionId === otherSession;
        const removed = removedMessageKey(otherUser, otherSession, 'm');
        const updates = messageUpdatesKey(otherUser, otherSession, 'm');
        expect(removed.startsWith(removedMessagePrefix(userId, sessionId))).toBe(same);
        expect(updates.startsWith(messageUpdatesPrefix(userId, sessionId))).toBe(same);
        // Neither prefix reaches the other kind, nor the session tombstones (which outlive the session's rows).
        expect(updates.startsWith(removedMessagePrefix(userId, sessionId))).toBe(false);
        expect(removed.startsWith(messageUpdatesPrefix(userId, sessionId))).toBe(false);
        expect(tombstoneKey(otherUser, otherSession).startsWith(removedMessagePrefix(userId, sessionId))).toBe(false);
        expect(tombstoneKey(otherUser, otherSession).startsWith(messageUpdatesPrefix(userId, sessionId))).toBe(false);
      }
    }
  });

  it('end with the message id, whatever it holds', () => {
    expect(removedMessageKey('u', 's', 'a:b"c')).toBe(`${removedMessagePrefix('u', 's')}a:b"c`);
    expect(messageUpdatesKey('u', 's', 'a:b"c')).toBe(`${messageUpdatesPrefix('u', 's')}a:b"c`);
  });
});

describe('lifeOf', () => {
  const row = (fields: Partial<SessionRow>) => ({ createdOrder: 'created', ...fields }) as SessionRow;

  it("is the row's life when it names one, even when an earlier create moved createdOrder", () => {
    expect(lifeOf(row({ life: 'life', createdOrder: 'earlier' }))).toBe('life');
  });

  it('is the create order for a row written before lives were named', () => {
    expect(lifeOf(row({}))).toBe('created');
  });
});

describe('userSessionRows', () => {
  it("reads every session row of the user and none of another user's, whatever the ids", async () => {
    const db = createDb(uniqueName('user-rows'));
    await db.open();
    const sessionRow = (userId: string, sessionId: string) => ({ userId, sessionId, updatedAt: 1 }) as unknown as SessionRow;
    await db.sessions.bulkPut([sessionRow('a', ''), sessionRow('a', 'x'), sessionRow('a', '\uffff'), sessionRow('', 'a'), sessionRow('ab', 'x'), sessionRow('b', 'a')]);
    expect((await userSessionRows(db, 'a')).map((r) => r.sessionId)).toEqual(['', 'x', '\uffff']);
    expect((await userSessionRows(db, 'b')).map((r) => r.sessionId)).toEqual(['a']);
    expect(await userSessionRows(db, 'c')).toEqual([]);
    db.close();
  });
});

describe('a corrupt row', () => {
  it("carries zod's issues, with the path of the bad field, as well as naming it in the message", async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const [first] = await session.append({ role: 'user', content: 'good' });
    await corruptMessage(tabula.dbName, first!);
    const error: unknown = await session.messages().then(
      () => null,
      (reason: unknown) => reason,
    );
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    const issues = (error as { issues?: Array<{ path: unknown[] }> }).issues ?? [];
    expect(issues.map((issue) => issue.path)).toEqual([['message', 'content']]);
    await tabula.close();
  });
});

describe('the database createDb opens', () => {
  it("leaves out Dexie's observability layer: Tabula's writes post no storagemutated event, another Dexie's do", async () => {
    const seen: string[] = [];
    const listener = (parts: Record<string, unknown>) => seen.push(...Object.keys(parts));
    Dexie.on('storagemutated', listener);
    try {
      // Dexie announces a database it creates as changed everywhere, with or without observability: open first.
      const plain = new Dexie(uniqueName('plain'));
      plain.version(1).stores({ items: 'id' });
      const db = createDb(uniqueName('tabula-db'));
      await Promise.all([plain.open(), db.open()]);
      seen.length = 0;

      // The control: a plain Dexie database, observability on. Dexie fires the event as the transaction
      // completes, before the write's promise settles, so it is there once the write is awaited.
      await plain.table('items').put({ id: 1 });
      expect(seen.filter((part) => part.startsWith(`idb://${plain.name}/`))).toContain(`idb://${plain.name}/items/`);

      await db.meta.put({ key: 'k', value: 1 });
      await db.transaction('rw', db.sessions, db.messages, async () => {
        await db.sessions.put({ userId: 'u', sessionId: 's' } as unknown as SessionRow);
        await db.messages.where('[userId+sessionId+id]').between(['u', 's', Dexie.minKey], ['u', 's', Dexie.maxKey]).delete();
      });
      expect(await db.meta.get('k')).toEqual({ key: 'k', value: 1 });
      expect(seen.filter((part) => part.startsWith(`idb://${db.name}/`))).toEqual([]);
      plain.close();
      db.close();
    } finally {
      Dexie.on('storagemutated').unsubscribe(listener);
    }
  });
});
