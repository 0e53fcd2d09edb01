/**
 * The `ServerStore` contract: what the sync server needs from storage, and
 * what every implementation guarantees. The server holds all policy (auth,
 * validation, limits, HTTP); a store only keeps each user's item log and
 * each client's last seq, and tells listeners when a user's log grows.
 *
 * Guarantees every store gives (checked by `runServerStoreTests`):
 * 1. **Atomic push.** `push` stores all of its new items or none of them,
 *    and resolves only after they are durably committed.
 * 2. **Idempotent by seq.** Items with seq ≤ the client's lastSeq are
 *    ignored (a retry); the rest must be lastSeq+1, lastSeq+2, … or the push
 *    is refused as a gap and nothing is stored.
 * 3. **One order per user.** Every item gets a position; positions of one
 *    user strictly increase in commit order, so a pull after position p never
 *    misses an item committed later, whatever instance committed it.
 * 4. **Isolation.** A user's pull and pokes only ever concern that user.
 * 5. **Pokes after commit.** Every subscriber of a user (on any instance
 *    sharing the store) is called after each push that appended items for
 *    that user has committed.
 * 6. **Compaction keeps content.** Consecutive board updates of a (user,
 *    session, life), no other update of that life between them, may be
 *    replaced by their `Y.mergeUpdates` at the position of the newest one
 *    they replace, in the same transaction, with `clientId: null`; updates
 *    of different lives (`after`) are never merged. Only updates the board
 *    rule accepts (`findBoardUpdateProblem`) are merged, and a merge the
 *    rule refuses is not stored; one compaction merges at most
 *    `compactBudgetBytes` (and `COMPACT_MAX_ROWS` rows), oldest first.
 *    Updates of a life older than the newest stored are dropped: every
 *    client drops them too.
 * 7. **Pokes carry small pushes.** A poke may hand the subscriber the items
 *    its push appended ({@link StorePokeItems}): exactly what
 *    `pull(userId, after, n)` returned right after that commit, positions
 *    `after` < p ≤ head, that user's only. Large pushes poke without them
 *    (they must fit {@link POKE_ITEMS_MAX_BYTES}).
 */
import type { Op } from '../core/ops.js';

/** An op or a decoded board update (of the session life `after` names, when it names one), as stored. */
export type StoredItem = { readonly op: Op } | { readonly board: { readonly sessionId: string; readonly update: Uint8Array; readonly after?: string } };

/** An item to store, numbered by the pushing client. */
export type StorePushItem = StoredItem & { readonly seq: number };

/**
 * An item read back: its position and the item as it goes on the wire, the
 * JSON text of a `PullItem`, `{"clientId":…,"op":{…}}` or
 * `{"clientId":…,"board":{"sessionId":…,"update":"<base64>","after":…}}`
 * (`clientId` null for a compacted board update, `after` only when pushed). The store builds it in its query from
 * what it wrote, the `JSON.stringify` of the validated op and the checked
 * board bytes, so a pull sends it as it is, without parsing and
 * re-serialising every item.
 */
export interface StorePulledItem {
  readonly position: number;
  readonly json: string;
}

/**
 * The items one push appended, as a poke hands them to subscribers: the
 * page `pull(userId, after, …)` returned right after the push committed, up
 * to the head the poke names. A client whose cursor is exactly `after` may
 * apply them instead of pulling.
 */
export interface StorePokeItems {
  /** The user's head before the push (0 when the log was empty). */
  readonly after: number;
  readonly items: readonly StorePulledItem[];
}

/**
 * Most items a poke carries; a larger push pokes without them and clients
 * pull. Pokes are for the latency of small live changes, pulls for bulk.
 */
export const POKE_MAX_ITEMS = 64;

/**
 * Most bytes of item JSON a poke carries. Under PostgreSQL's NOTIFY payload
 * limit (8000 bytes) with room for the envelope and a 256-character user id.
 */
export const POKE_ITEMS_MAX_BYTES = 7000;

/** `items` when they may travel in a poke (few and small enough), else undefined. */
export function pokeItems(after: number, items: readonly StorePulledItem[]): StorePokeItems | undefined {
  if (items.length === 0 || items.length > POKE_MAX_ITEMS) return undefined;
  let bytes = 0;
  for (const item of items) {
    bytes += Buffer.byteLength(item.json) + 24;
    if (bytes > POKE_ITEMS_MAX_BYTES) return undefined;
  }
  return { after, items };
}

/** What `push` did. */
export type StorePushResult =
  /** Stored (or all items were retries); `head` is the user's highest position. */
  | { readonly status: 'applied'; readonly lastSeq: number; readonly appended: number; readonly head: number }
  /** Refused: the first new item was not lastSeq + 1. Nothing was stored. */
  | { readonly status: 'gap'; readonly lastSeq: number };

/** One page of a user's log. */
export interface StorePullPage {
  readonly items: readonly StorePulledItem[];
  /** True when items after the last returned one exist. */
  readonly more: boolean;
}

/** Storage for the sync server. See the module comment for the guarantees. */
export interface ServerStore {
  /**
   * Applies one push of `clientId` for `userId`: `items` sorted by seq,
   * without duplicate seqs (the server checks both).
   */
  push(userId: string, clientId: string, items: readonly StorePushItem[]): Promise<StorePushResult>;
  /** Up to `limit` items of `userId` with position > `after` (0 for the start), in position order. */
  pull(userId: string, after: number, limit: number): Promise<StorePullPage>;
  /** The user's highest position (0 when the user has no items). */
  head(userId: string): Promise<number>;
  /** The highest seq stored for (user, client), 0 when none. */
  lastSeq(userId: string, clientId: string): Promise<number>;
  /**
   * Calls `onPoke(head, appended?)` after every committed push that appended
   * items for `userId`; `appended` holds those items when the store passes
   * them (guarantee 7). Resolves once pokes are delivered, with the
   * unsubscribe function.
   */
  subscribe(userId: string, onPoke: (head: number, appended?: StorePokeItems) => void): Promise<() => void>;
  /** Releases connections and files; pushes already running finish first. Idempotent. */
  close(): Promise<void>;
}

/** Options every store takes. */
export interface StoreOptions {
  /**
   * Board updates of one (user, session, life) kept before they are merged
   * into one with `Y.mergeUpdates`. @default 100
   */
  readonly compactBoardAfter?: number;
  /**
   * Most bytes of stored board updates one compaction merges (it runs inside a push, so this bounds
   * the push's time: merging costs about 35 ms a MiB). A life's rows then settle into merged updates
   * of about this size. @default 1048576 (1 MiB)
   */
  readonly compactBudgetBytes?: number;
}
