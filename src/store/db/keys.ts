/**
 * The keys of the meta table that the store writes for itself, and the
 * helpers that build and read them: one place for every prefix, so no two
 * kinds of entry can share one and a reader never re-derives a key by hand.
 * The sync engine's keys (`sync:` …) are not here: replication/keys.ts names them
 * (`syncNames`).
 *
 * Every key names its session as JSON, `["user","session"]`, so ids holding
 * `:`, `"` or any other character cannot run into one another; a message id
 * comes last, after the session's prefix, as it is, so one prefix scan finds
 * all of a session's entries.
 */

/** What precedes a session tombstone's key. */
const TOMBSTONE = 'deleted:';
/** What precedes a removed message's tombstone key. */
const REMOVED = 'removed:';
/** What precedes a message's update register key. */
const UPDATES = 'updates:';

/** The session of a key, as JSON: `["user","session"]`. */
const sessionPart = (userId: string, sessionId: string): string => JSON.stringify([userId, sessionId]);

/** The meta key of a deleted session's tombstone (its value: the delete's order key). */
export function tombstoneKey(userId: string, sessionId: string): string {
  return `${TOMBSTONE}${sessionPart(userId, sessionId)}`;
}

/**
 * The meta key prefix of every session tombstone of `userId` (and of no other user's: the user's id
 * ends in the JSON's closing quote and the comma after it, so user "a" does not match user "ab").
 */
export function userTombstonePrefix(userId: string): string {
  return `${TOMBSTONE}${JSON.stringify([userId]).slice(0, -1)},`;
}

/** The session a tombstone key names (see {@link tombstoneKey}); undefined for a key that is not one. */
export function parseTombstoneKey(key: string): { userId: string; sessionId: string } | undefined {
  if (!key.startsWith(TOMBSTONE)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(key.slice(TOMBSTONE.length));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) return undefined;
  const [userId, sessionId] = parsed as unknown[];
  return typeof userId === 'string' && typeof sessionId === 'string' ? { userId, sessionId } : undefined;
}

/** The meta key prefix of a session's removed-message tombstones. */
export function removedMessagePrefix(userId: string, sessionId: string): string {
  return `${REMOVED}${sessionPart(userId, sessionId)}:`;
}

/** The meta key of a removed message's tombstone (its value: the greatest order of a remove of it). */
export function removedMessageKey(userId: string, sessionId: string, id: string): string {
  return removedMessagePrefix(userId, sessionId) + id;
}

/** The message id a removed-message tombstone key of the session names; undefined for a key of another session or kind. */
export function parseRemovedMessageKey(userId: string, sessionId: string, key: string): string | undefined {
  const prefix = removedMessagePrefix(userId, sessionId);
  return key.startsWith(prefix) ? key.slice(prefix.length) : undefined;
}

/** The meta key prefix of a session's message-update registers. */
export function messageUpdatesPrefix(userId: string, sessionId: string): string {
  return `${UPDATES}${sessionPart(userId, sessionId)}:`;
}

/**
 * The meta key of a message's update register: the latest message.update of each status (its order and
 * message), kept while the session lives, so a restore can fold into a copy the updates ordered after it
 * even when they were applied to an original that a clear has dropped since.
 */
export function messageUpdatesKey(userId: string, sessionId: string, id: string): string {
  return messageUpdatesPrefix(userId, sessionId) + id;
}
