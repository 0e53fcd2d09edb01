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
 *    that user has committed. Pushes that land close together may be
 *    announced by one call naming the newest head.
 * 6. **Compaction keeps content.** Consecutive board updates of a (user,
 *    session, life), no other update of that life between them, may be
 *    replaced by their `Y.mergeUpdates` at the position of the newest one
 *    they replace, in the same transaction, with `clientId: null`; updates
 *    of different lives (`after`) are never merged. Only updates the board
 *    rule accepts (`findBoardUpdateProblem`) are merged, and a merge the
 *    rule refuses is not stored; one compaction merges at most
 *    `compactBudgetBytes` (and `COMPACT_MAX_ROWS` rows), oldest first.
 *    Updates of a life older than the newest life a stored op began
 *    (guarantee 9) are dropped: every client drops them too. Lives compare
 *    in UTF-16 code-unit order, as clients compare them (order keys are
 *    ASCII, so byte order is the same order; never a database collation's).
 * 7. **Pokes carry small pages, read from the store.** A poke may hand the
 *    subscriber items ({@link StorePokeItems}): exactly what
 *    `pull(userId, after, n, maxBytes)` returns, positions `after` < p ≤
 *    head, that user's only, read from the store's own storage when the
 *    poke is made (never taken from what another instance sent). Each poke
 *    that carries items continues where the one before it on that store
 *    ended. Pages over {@link POKE_MAX_ITEMS} items or
 *    {@link POKE_ITEMS_MAX_BYTES} poke without them.
 * 8. **Pages bounded in bytes.** `pull` returns at least one item when there
 *    is one, then stops before the item that would take the page's wire JSON
 *    past `maxBytes`; it reads the content of no item outside the page (at
 *    most their lengths), so a page of large items costs what it returns.
 * 9. **Only begun lives.** A board update may name a session life (`after`)
 *    only if a stored op of that user and session began it, or an earlier
 *    item of the same push did ({@link livesBegunBy}: a `session.delete`
 *    begins the life named by its order; an op written in a life proves
 *    that life's delete, as clients take it). `''` (a first life) and no `after`
 *    (boards from before lives were named) are always allowed. A push that
 *    names any other life is refused whole (`unknown-life`) and stores
 *    nothing, so no push can make the store drop a board clients keep.
 * 10. **An epoch per storage.** `epoch()` is an id drawn at random when the
 *    store's storage is created and kept with its data: the same through
 *    every reopen and on every instance sharing the storage, a new one for
 *    new (emptied) storage. Clients take a new epoch to mean that the
 *    server no longer holds what they pushed and pulled.
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
  /** The item's position in the user's log (1, 2, …): the cursor a pull continues from. */
  readonly position: number;
  /** The `PullItem` as JSON text, sent as it is. */
  readonly json: string;
}

/**
 * The items a poke hands its subscribers: the page `pull(userId, after, …)`
 * returns, up to the head the poke names, read from the store's storage. A
 * client whose cursor is exactly `after` may apply them instead of pulling.
 */
export interface StorePokeItems {
  /** The position the items continue: the head of the store's previous poke of that user, or the head before the push (0 for the start of the log). */
  readonly after: number;
  /** The items after `after`, in log order (64 at most: a larger push pokes without items). */
  readonly items: readonly StorePulledItem[];
}

/**
 * Most items a poke carries; a larger push pokes without them and clients
 * pull. Pokes are for the latency of small live changes, pulls for bulk.
 */
export const POKE_MAX_ITEMS = 64;

/**
 * Most bytes of item JSON a poke carries (with 24 bytes of envelope per
 * item): a few small live changes, sent whole on the event stream.
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

/**
 * `maxBytes` of a pull as a store's query binds it: a whole number from 0 to
 * `Number.MAX_SAFE_INTEGER` (`Infinity` is no budget; NaN is 0, one item).
 */
export function pageBudget(maxBytes: number): number {
  return Number.isNaN(maxBytes) ? 0 : Math.max(0, Math.min(Math.floor(maxBytes), Number.MAX_SAFE_INTEGER));
}

/**
 * The session lives (their `after` values) an op shows to have begun, for
 * guarantee 9: a `session.delete` begins the life whose `after` is the
 * delete's order, and an op that names its life proves that life's delete
 * (a device that never pushed the delete still pushes the new life's ops;
 * every client ends older lives on seeing one). `''`, the first life, needs
 * no beginning.
 */
export function livesBegunBy(op: Pick<Op, 'kind' | 'order' | 'after'>): string[] {
  const lives = op.kind === 'session.delete' ? [op.order] : [];
  if (op.after !== undefined && op.after !== '' && op.after !== lives[0]) lives.push(op.after);
  return lives;
}

/**
 * The lives stored ops began ({@link livesBegunBy}), as (user, session,
 * life), for a store that starts recording lives over rows it already holds.
 * `ops` are rows as stored (the op's JSON text). A store's query may skip
 * rows whose text holds neither `"kind":"session.delete"` nor `"after":"`
 * (no user text holds those quotes unescaped). JSON.parse, not the
 * database's JSON functions: PostgreSQL's refuse the lone-surrogate escapes
 * an op's text may hold.
 */
export function livesOfStoredOps(ops: readonly { userId: string; sessionId: string; op: string }[]): [string, string, string][] {
  return ops.flatMap(({ userId, sessionId, op }) => {
    const parsed = JSON.parse(op) as Partial<Record<'kind' | 'order' | 'after', unknown>>;
    if (typeof parsed.order !== 'string' || (parsed.after !== undefined && typeof parsed.after !== 'string')) return [];
    return livesBegunBy(parsed as Pick<Op, 'kind' | 'order' | 'after'>).map((life): [string, string, string] => [userId, sessionId, life]);
  });
}

/** What `push` did. */
export type StorePushResult =
  /** Stored (or all items were retries); `head` is the user's highest position. */
  | { readonly status: 'applied'; readonly lastSeq: number; readonly appended: number; readonly head: number }
  /** Refused: the first new item was not lastSeq + 1. Nothing was stored. */
  | { readonly status: 'gap'; readonly lastSeq: number }
  /**
   * Refused: `items[index]` is a board update naming a session life that no
   * stored op, and no earlier item of the push, began (guarantee 9).
   * Nothing was stored.
   */
  | { readonly status: 'unknown-life'; readonly index: number };

/** One page of a user's log. */
export interface StorePullPage {
  /** The page's items, in log order. */
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
  /**
   * Up to `limit` items of `userId` with position > `after` (0 for the
   * start), in position order, and no more than fit in `maxBytes` bytes of
   * wire JSON (UTF-8 of the items' `json`, summed): always the first item
   * when there is one, then none from the item that would pass the budget
   * on (guarantee 8).
   */
  pull(userId: string, after: number, limit: number, maxBytes: number): Promise<StorePullPage>;
  /** The user's highest position (0 when the user has no items). */
  head(userId: string): Promise<number>;
  /** The highest seq stored for (user, client), 0 when none. */
  lastSeq(userId: string, clientId: string): Promise<number>;
  /** The storage's epoch (guarantee 10): 1–64 characters of `A–Z a–z 0–9 _ -`. */
  epoch(): Promise<string>;
  /**
   * Calls `onPoke(head, appended?)` after committed pushes that appended
   * items for `userId` (guarantee 5); `appended` holds the items up to
   * `head` when the store passes them (guarantee 7). Resolves once pokes
   * are delivered, with the unsubscribe function.
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
