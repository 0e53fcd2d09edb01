/**
 * Every name sync keeps things under: the meta keys of one user's sync
 * state on a profile, and the Web Lock and BroadcastChannel the sync
 * engines of a profile share (the store's own channels and locks are in
 * db/keys.ts). One owner per name, so that a key written in
 * one module and read in another cannot drift apart. What the keys hold is
 * the business of the modules that read and write them (outbox.ts, pages.ts,
 * boards.ts, seed.ts, host.ts); the names alone live here.
 */

/**
 * The names of one user's sync state on a profile. Everything sync keeps is per (profile, user): the
 * cursor into the user's log on the server, the seq counter and client id the server numbers the user's
 * pushes by, the outbox rows (each names its user) and the leader lock and tab channel, so two users
 * taking turns on one browser profile (or signed in in two tabs of it) never push, pull or count each
 * other's data. The seq counter's row also marks the user as one who has synced on this profile: from
 * then on every write of the user is queued, with sync on or off (see writer.ts).
 */
export const syncNames = {
  /** The meta key of the user's last outbox seq (0 before the first row); absent while the user has never synced here. */
  seq: (userId: string) => `sync:seq:${JSON.stringify([userId])}`,
  /** The meta key of the user's pull cursor (absent: pull from the start). */
  cursor: (userId: string) => `sync:cursor:${JSON.stringify([userId])}`,
  /** The meta key of the client id the user's pushes from this profile carry. */
  clientId: (userId: string) => `sync:clientId:${JSON.stringify([userId])}`,
  /** The meta key that marks the user's existing data as queued (the first sync's seed); the name earlier versions wrote. */
  seeded: (userId: string) => `sync:seeded:${userId}`,
  /** The meta key of the epoch of the server the user's sync state is of (absent before the first answer that named one). */
  epoch: (userId: string) => `sync:epoch:${JSON.stringify([userId])}`,
  /** The meta key of the user's clock correction, in ms (see `SyncClock` in contract.ts). */
  clockOffset: (userId: string) => `sync:clockOffset:${JSON.stringify([userId])}`,
  /** The meta key of the last clock correction measured on this profile, by any user: a user's first open here starts from it. */
  profileClockOffset: 'sync:clockOffset',
  /** The meta key of the user's parked items (see `ParkedItem` in contract.ts), with their outbox rows. */
  parked: (userId: string) => `sync:parked:${JSON.stringify([userId])}`,
  /** The meta key that names a clock (an HLC client id) of one of this profile's tabs that wrote with sync on. */
  localClock: (clientId: string) => `sync:clock:${clientId}`,
  /** The Web Lock of the user's sync leader on profile `name`. */
  leaderLock: (name: string, userId: string) => `tabula:${name}:sync-leader:${JSON.stringify([userId])}`,
  /** The BroadcastChannel of the user's sync engines on profile `name` (status, nudges). */
  channel: (name: string, userId: string) => `tabula:${name}:sync:${JSON.stringify([userId])}`,
} as const;

/**
 * The meta keys of the one sync state a profile had before it was kept per user (schema version 4 and
 * earlier): the upgrade gives it to the user it belonged to (see schema.ts).
 */
export const LEGACY_SYNC_KEYS = { seq: 'sync:seq', cursor: 'sync:cursor', clientId: 'sync:clientId' } as const;

/**
 * The prefix of the meta keys that record, per board life, what the sync leader has queued of it
 * (boards.ts: `sync:board:` then the JSON of `[userId, sessionId]` or `[userId, sessionId, after]`).
 */
export const BOARD_QUEUED_PREFIX = 'sync:board:';

/** What any tab posts on a user's sync channel after it queued rows of that user: the leader pushes them (and recounts). */
export const SYNC_NUDGE = { v: 1, kind: 'nudge' } as const;
