/**
 * What follows a committed transaction, in one place: a local write's
 * (writer.ts, adopt.ts) and a page pulled by sync (replication/pages.ts)
 * take the same steps in the same order. Only what the transaction
 * committed comes here; a transaction that failed lands nothing and
 * announces nothing.
 */
import type { OutboxRow, SessionRow } from './db/rows.js';
import type { SessionChange } from './changes.js';
import { mapStorageError } from './errors.js';
import { lifeOf } from './db/rows.js';
import type { StoreContext } from './context.js';

/** What one committed transaction did, as the steps after it need it. */
export interface Committed {
  /** Where the ops came from: this tab's write, or sync (another device's, pulled). */
  readonly origin: 'local' | 'remote';
  /** The session rows the transaction left, as committed; `row` undefined for one gone or not known. */
  readonly rows: readonly { readonly userId: string; readonly sessionId: string; readonly row: SessionRow | undefined }[];
  /** The changes to announce, one per session (a session whose ops changed nothing is left out). */
  readonly changes: readonly Omit<SessionChange, 'origin'>[];
  /** The outbox rows the transaction queued, by user. */
  readonly queued?: ReadonlyMap<string, readonly OutboxRow[]>;
}

/**
 * The steps after a commit, in this order, each for a reason:
 *
 * 1. The known rows (known-rows.ts) become the rows committed. First, so that a listener of step 3 that
 *    writes at once builds its write on them; and set here, not by a feed subscription, so that nothing
 *    depends on the order in which the feed calls its listeners (the feed's own subscription forgets
 *    only what other tabs changed).
 * 2. The sync leader of each user that rows were queued for hears of them (this tab's engine gets the
 *    rows themselves, to push without reading them back; another tab's a nudge): before the listeners,
 *    which may take their time, so the push is under way first.
 * 3. The changes are published, to this tab's listeners and the other tabs.
 * 4. For a change sync brought, a delete (or a create of a life past the last delete known here, which
 *    proves one) ends the session's boards of other lives: after the change is published, as a local
 *    delete's board goes after its write. In the background; close() waits for it.
 */
export function afterCommit(store: StoreContext, committed: Committed): void {
  for (const { userId, sessionId, row } of committed.rows) store.knownRows.set(userId, sessionId, row);
  for (const [userId, rows] of committed.queued ?? []) if (rows.length > 0) store.sync?.nudge(userId, rows);
  for (const change of committed.changes) {
    store.feed.publish(change, committed.origin);
    if (committed.origin === 'remote' && (change.kinds.includes('session.delete') || change.kinds.includes('session.create'))) pruneBoards(store, change.userId, change.sessionId);
  }
}

/**
 * A session deleted on another device (or created in a life past the last
 * delete known here, which proves that delete): its board closes in every
 * tab here and its database goes, as a local delete's does. Lives are named
 * per replica, so every life but the current one (the session may have been
 * created again in the same pull) ends. close() waits for it.
 */
function pruneBoards(store: StoreContext, userId: string, sessionId: string): void {
  const pruning: Promise<void> = store.db.sessions
    .get([userId, sessionId])
    .then((row) => store.boards.prune(userId, sessionId, row && lifeOf(row)))
    .catch((error: unknown) => store.onError(mapStorageError(error, `delete the blackboard of session "${sessionId}", deleted on another device`)))
    .finally(() => store.background.delete(pruning));
  store.background.add(pruning);
}
