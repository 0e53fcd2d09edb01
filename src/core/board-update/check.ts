/**
 * What a board update is checked against and what a refusal says: the shapes the board rule takes and
 * returns, and the limits it applies unless told otherwise. This module holds no logic; `walk.ts` reads
 * an update against these.
 */

/** Limits of one board update. */
export interface BoardUpdateLimits {
  /** Largest update, in bytes. @default 524288 (512 KiB) */
  readonly maxBytes: number;
  /**
   * Most structs (items, GC and skip runs) plus delete-set ranges in one update. Legitimate updates
   * take 10 bytes or more each (measured: map overwrites, texts edited at random, with and without GC),
   * so about 53 000 at the byte limit; this refuses updates four times denser. @default 131072
   */
  readonly maxStructs: number;
}

/** The limits a push's board update is held to unless the server is told otherwise (`SyncLimits`). */
export const DEFAULT_BOARD_UPDATE_LIMITS: BoardUpdateLimits = Object.freeze({ maxBytes: 512 * 1024, maxStructs: 131_072 });

/**
 * No size limits: the wire rules only. For updates whose size is not the reader's to bound: a tab's sync
 * step 2 carries the whole board, and a compacted server row holds many pushes.
 */
export const NO_BOARD_UPDATE_LIMITS: BoardUpdateLimits = Object.freeze({ maxBytes: Number.POSITIVE_INFINITY, maxStructs: Number.POSITIVE_INFINITY });

/** What `findBoardUpdateProblem` checks an update against. */
export interface BoardUpdateCheck extends BoardUpdateLimits {
  /**
   * Where the item with id (client, clock) of the document the update is for lives, for an origin the
   * update names but does not hold: its key when it is an item of the blackboard map, null when it is
   * anything else, undefined when the document does not hold it. Absent: such origins are not followed.
   */
  readonly blackboardKeyAt?: (client: number, clock: number) => string | null | undefined;
}

/** Why an update is refused. */
export interface BoardUpdateProblem {
  /**
   * `malformed`: it is not a Yjs update Yjs reads back safely (it does not decode, has bytes after its
   * delete set, or has a clock or length past `Number.MAX_SAFE_INTEGER`); `refused`: it decodes, but would
   * put a subdocument in the doc or something other than JSON in the blackboard map; `too-large`: over
   * a {@link BoardUpdateLimits} limit.
   */
  readonly kind: 'malformed' | 'refused' | 'too-large';
  /** The reason, a clause starting with "it" or "key" (`key "k" would hold ContentType, not a JSON value`). */
  readonly message: string;
}
