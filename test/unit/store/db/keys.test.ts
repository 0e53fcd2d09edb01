/**
 * The meta keys of a session (db/keys.ts): tombstones, removed-message
 * tombstones and update registers, which store/apply/ deletes by prefix and sync
 * seeding reads back, told apart whatever the ids hold.
 */
import { describe, expect, it } from 'vitest';
import {
  messageUpdatesKey,
  messageUpdatesPrefix,
  parseRemovedMessageKey,
  parseTombstoneKey,
  removedMessageKey,
  removedMessagePrefix,
  tombstoneKey,
  userTombstonePrefix,
} from '../../../../src/store/db/keys.js';

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

describe("a user's tombstones", () => {
  it("are found by the user's prefix, and no other user's are, whatever the ids", () => {
    for (const [userId] of SESSIONS) {
      for (const [otherUser, otherSession] of SESSIONS) {
        expect(tombstoneKey(otherUser, otherSession).startsWith(userTombstonePrefix(userId))).toBe(userId === otherUser);
      }
    }
  });

  it('name the session they were made for when read back', () => {
    for (const [userId, sessionId] of SESSIONS) expect(parseTombstoneKey(tombstoneKey(userId, sessionId))).toEqual({ userId, sessionId });
  });

  it('are told from other keys: another kind, a key that is not JSON, a key of another shape', () => {
    for (const key of [removedMessageKey('u', 's', 'm'), messageUpdatesKey('u', 's', 'm'), 'deleted:', 'deleted:["u"', 'deleted:["u"]', 'deleted:["u","s","x"]', 'deleted:[1,"s"]', 'deleted:{"u":"s"}', 'sync:seq']) {
      expect(parseTombstoneKey(key)).toBeUndefined();
    }
  });
});

describe('removed-message tombstone keys', () => {
  it("give back the message id, whatever it holds, for the session's own keys only", () => {
    for (const [userId, sessionId] of SESSIONS) {
      for (const [otherUser, otherSession] of SESSIONS) {
        const same = userId === otherUser && sessionId === otherSession;
        expect(parseRemovedMessageKey(userId, sessionId, removedMessageKey(otherUser, otherSession, 'a:b"c'))).toBe(same ? 'a:b"c' : undefined);
        expect(parseRemovedMessageKey(userId, sessionId, messageUpdatesKey(otherUser, otherSession, 'm'))).toBeUndefined();
      }
    }
  });
});
