/**
 * The names the store keeps things under: the keys of the meta table that
 * it writes for itself, with the helpers that build and read them, and the
 * BroadcastChannels and Web Locks its tabs share ({@link storeNames}). One
 * place for every prefix and name, so no two kinds of entry can share one
 * and a reader never re-derives a name by hand. The sync engine's names
 * (`sync:` … keys, its leader lock and channel) are not here:
 * replication/keys.ts names them (`syncNames`); the blackboard's are in
 * blackboard/lives.ts.
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

/**
 * The BroadcastChannels and Web Locks the tabs of one database share, each named for the database
 * `name`. They are a wire between tabs: a tab of an older version talks to a newer one over them, so
 * every name stays byte for byte what earlier versions used (test/unit/store/db/names.test.ts pins them).
 * A session is named as JSON, `["user","session"]`, as in the meta keys.
 */
export const storeNames = {
  /** The channel of the change feed (changes.ts): which session changed, for the other tabs. */
  changes: (name: string) => `tabula:${name}:changes`,
  /** The channel that carries `interrupt()` to the tab holding a session's run, and its acknowledgement (coordinator.ts). */
  runs: (name: string) => `tabula:${name}:runs`,
  /** The Web Lock that one run of the session holds (coordinator.ts, runs.ts). */
  runLock: (name: string, userId: string, sessionId: string) => `tabula:${name}:run:${sessionPart(userId, sessionId)}`,
  /** The Web Lock a tab holds while it streams a message of the session (stream.ts). */
  streamLock: (name: string, userId: string, sessionId: string, messageId: string) => `tabula:${name}:stream:${sessionPart(userId, sessionId)}:${messageId}`,
  /** The channel on which every tab announces its stored board changes, for the sync leader (board-notices.ts). */
  boardChanges: (name: string) => `tabula:${name}:board-changes`,
} as const;
