/**
 * The change feed: tells subscribers which session changed, in this tab
 * (directly, after the transaction committed) and in every other tab of the
 * same origin (over a BroadcastChannel named for the database).
 *
 * Messages from other tabs are validated; a malformed one is reported to
 * `onError` and dropped, never thrown into this tab's code. The feed says
 * *that* something changed and which kinds of op did it; readers re-read
 * IndexedDB, which is the source of truth.
 */
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from '../core/errors.js';
import { StateFieldsSchema, type OpKind, type StateFields } from '../core/ops.js';
import { safeParse } from '../core/validation.js';
import { storeNames } from './db/keys.js';

/** Where a change came from. */
export type ChangeOrigin = 'local' | 'tab' | 'remote';

/** One committed change to a session. */
export interface SessionChange {
  /** The user whose session changed. */
  readonly userId: string;
  /** The session that changed. */
  readonly sessionId: string;
  /** The kinds of op that the change applied, e.g. ['message.append']. */
  readonly kinds: readonly OpKind[];
  /** Where the change was made: this tab, another tab of this origin, or another device (sync). */
  readonly origin: ChangeOrigin;
  /**
   * Set when sync brought another device's save (or restore) that replaced a save made here without
   * being built on it, whatever the two versions (architecture.md, Convergence): both states, so the app can save a merge.
   * A save built on this device's save (made after that device had it) is no conflict.
   */
  readonly conflict?: SaveConflictInfo;
  /**
   * Set on the change of a delete, brought by sync, that dropped work on the session's old life which
   * the deleting device had not seen when it deleted (made offline, or concurrently, on this device or
   * another): what is gone, on every device. Absent when the deleter had everything (or its delete is
   * from a version that did not say what it had). See {@link DroppedWorkInfo}.
   */
  readonly dropped?: DroppedWorkInfo;
}

/** A local state save that another device's save, not built on it, replaced. */
export interface SaveConflictInfo {
  /** The version of the save made here (the replacing save's version may be higher). */
  readonly version: number;
  /** The state this device saved, now replaced. */
  readonly local: StateFields;
  /** The state that won, now stored. */
  readonly remote: StateFields;
}

/**
 * What a delete dropped that its deleting device never saw. A row is named when the op that last wrote
 * it had not reached the deleting device; a blackboard key when its value here was written by a board
 * change that had not. Messages an import or fork copied are judged by the order keys of what they copy;
 * its notes are never named (their source still has them). Not named: the prefix, journal entries and
 * checkpoints.
 */
export interface DroppedWorkInfo {
  /** Ids of the messages (appended, or last updated, by such work), in session order. */
  readonly messages: readonly string[];
  /** Memory keys set by such work (a key it deleted is not named), by scope then key. */
  readonly memory: readonly { readonly scope: string; readonly key: string }[];
  /** Ids of its notes, in order. */
  readonly notes: readonly string[];
  /** True when the session's state was last saved or restored by such work. */
  readonly state: boolean;
  /**
   * Keys of the blackboard whose value was written by such work (a key it deleted is not named), sorted;
   * absent when none. Only deletes that say what their device had of the board (made by this version or
   * later) name any. A board written by more Yjs clients than a delete can list names some keys its
   * deleter had seen (docs/guide/limits.md).
   */
  readonly blackboard?: readonly string[];
}

const DroppedWorkSchema = z.strictObject({
  messages: z.array(z.string()),
  memory: z.array(z.strictObject({ scope: z.string(), key: z.string() })),
  notes: z.array(z.string()),
  state: z.boolean(),
  blackboard: z.optional(z.array(z.string())),
});

const WireChangeSchema = z.strictObject({
  v: z.literal(1),
  userId: z.string(),
  sessionId: z.string(),
  kinds: z.array(z.string()),
  fromRemote: z.boolean(),
  conflict: z.optional(z.strictObject({ version: z.number(), local: StateFieldsSchema, remote: StateFieldsSchema })),
  dropped: z.optional(DroppedWorkSchema),
});

type Listener = (change: SessionChange) => void;

export interface ChangeFeed {
  /** Announces a committed change here and to the other tabs. */
  publish(change: Omit<SessionChange, 'origin'>, origin: 'local' | 'remote'): void;
  /** Listens to one session's changes; returns the unsubscribe function. */
  subscribe(userId: string, sessionId: string, listener: Listener): () => void;
  /** Listens to the changes of every session (for lists of sessions); returns the unsubscribe function. */
  subscribeAll(listener: Listener): () => void;
  close(): void;
}

/** Opens the feed for database `name`. */
export function createChangeFeed(name: string, onError: (error: TabulaError) => void): ChangeFeed {
  const listeners = new Map<string, Set<Listener>>();
  const keyOf = (userId: string, sessionId: string) => JSON.stringify([userId, sessionId]);
  const channelName = storeNames.changes(name);
  const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(channelName) : null;
  let closed = false;

  const everyListeners = new Set<Listener>();

  const deliver = (change: SessionChange) => {
    for (const listener of [...(listeners.get(keyOf(change.userId, change.sessionId)) ?? []), ...everyListeners]) {
      try {
        listener(change);
      } catch (error) {
        onError(new TabulaError('argument/invalid', 'A subscribe() listener threw; the others were still called.', { cause: error }));
      }
    }
  };

  if (channel) {
    channel.onmessage = (event: MessageEvent<unknown>) => {
      const parsed = safeParse(WireChangeSchema, event.data);
      if (!parsed.success) {
        onError(
          new TabulaError('schema/invalid', `Ignored a malformed change message from another tab: ${describeIssues(parsed.error.issues)}.`, {
            issues: parsed.error.issues,
          }),
        );
        return;
      }
      const { userId, sessionId, kinds, fromRemote, conflict, dropped } = parsed.data;
      deliver({ userId, sessionId, kinds: kinds as OpKind[], origin: fromRemote ? 'remote' : 'tab', ...(conflict ? { conflict } : {}), ...(dropped ? { dropped } : {}) });
    };
  }

  return {
    publish(change, origin) {
      // A write that committed while close() ran still reaches the other tabs, through a channel of its
      // own (this one is closed), and its caller still hears of its success, not of the closed channel.
      const out = closed && channel ? new BroadcastChannel(channelName) : channel;
      // The other tabs first: their delivery then runs while this tab's listeners run.
      out?.postMessage({
        v: 1,
        userId: change.userId,
        sessionId: change.sessionId,
        kinds: [...change.kinds],
        fromRemote: origin === 'remote',
        ...(change.conflict ? { conflict: change.conflict } : {}),
        ...(change.dropped ? { dropped: change.dropped } : {}),
      });
      if (out !== channel) out?.close();
      deliver({ ...change, origin });
    },
    subscribe(userId, sessionId, listener) {
      const key = keyOf(userId, sessionId);
      let set = listeners.get(key);
      if (!set) listeners.set(key, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(key);
      };
    },
    subscribeAll(listener) {
      everyListeners.add(listener);
      return () => {
        everyListeners.delete(listener);
      };
    },
    close() {
      closed = true;
      listeners.clear();
      everyListeners.clear();
      channel?.close();
    },
  };
}
