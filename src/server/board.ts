/**
 * Blackboard updates on the server: checking a pushed Yjs update before it
 * is stored, with the rule clients apply updates by
 * (`findBoardUpdateProblem`, src/core/board-update/), and compaction's
 * choice and merge of a life's stored updates. Uses only Yjs's
 * document-free `mergeUpdates`, on updates that rule has passed: nothing
 * here builds a Y.Doc. The stores own the SQL; this module owns what may be
 * merged and how much at once.
 */
import * as Y from 'yjs';
import { NO_BOARD_UPDATE_LIMITS, findBoardUpdateProblem } from '../core/board-update/index.js';
import { TabulaError } from '../core/errors.js';
import type { SyncLimits } from '../sync/protocol.js';

/**
 * Decodes a base64 Yjs update and checks it: under `maxUpdateBytes`
 * decoded and `maxUpdateStructs` (`sync/too-large`), and an update a client
 * applies (`schema/invalid`: it decodes completely, holds no subdocument,
 * and puts only JSON in the blackboard map). `where` names the item in the
 * error (`items[3].board.update`).
 */
export function decodeBoardUpdate(base64: string, limits: Pick<SyncLimits, 'maxUpdateBytes' | 'maxUpdateStructs'>, where: string): Uint8Array {
  const maxBytes = limits.maxUpdateBytes;
  // base64 length bounds the decoded size: refuse before allocating.
  if (Math.floor((base64.length * 3) / 4) - 2 > maxBytes) {
    throw new TabulaError('sync/too-large', `${where} is over the ${maxBytes}-byte limit for one board update; push smaller updates.`);
  }
  const bytes = new Uint8Array(Buffer.from(base64, 'base64'));
  if (bytes.byteLength > maxBytes) {
    throw new TabulaError('sync/too-large', `${where} is ${bytes.byteLength} bytes, over the ${maxBytes}-byte limit for one board update; push smaller updates.`);
  }
  const problem = findBoardUpdateProblem(bytes, { maxBytes, maxStructs: limits.maxUpdateStructs });
  if (problem === null) return bytes;
  switch (problem.kind) {
    case 'too-large':
      throw new TabulaError('sync/too-large', `${where} is refused: ${problem.message}; push smaller updates.`);
    case 'malformed':
      throw new TabulaError('schema/invalid', `${where} is not a Yjs update a client can apply: ${problem.message}; send Y.encodeStateAsUpdate output or an update event's bytes.`);
    case 'refused':
      throw new TabulaError(
        'schema/invalid',
        `${where} is refused: ${problem.message}; the blackboard map holds JSON values under keys, and boards hold no subdocuments (keep other shared types in other roots of the doc).`,
      );
  }
}

/** Standard base64 of bytes, for the wire. */
export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/**
 * Most rows one compaction merges, whatever their bytes: `Y.mergeUpdates` re-sorts its inputs for every
 * struct it writes, so its time grows with the square of their number (measured: 100 one-key updates
 * 7 ms, 1000 53 ms, 10 000 1.4 s).
 */
export const COMPACT_MAX_ROWS = 500;

/** Chooses the rows of one compaction, offered oldest first. */
export interface CompactionWindow {
  /** Offers the life's next row (position, size in bytes); false when the window is complete: stop offering. */
  offer(position: number, bytes: number): boolean;
  /** The chosen rows' positions, in order: the oldest run of at least two consecutive rows within the budget, or none. */
  positions(): readonly number[];
}

/** One merge to write: `positions` (consecutive rows of one life) replaced by `merged` at the last of them. */
export interface CompactionRun {
  readonly positions: readonly number[];
  readonly merged: Uint8Array;
}

/** Compaction's policy, one per store (it remembers which refused rows it has logged). */
export interface BoardCompactor {
  /** A window for one compaction. */
  window(): CompactionWindow;
  /**
   * Merges the window's rows (all of them, in position order): rows the board rule refuses stay out and
   * are logged once; each run of at least two consecutive accepted rows becomes one merged update.
   */
  merge(userId: string, sessionId: string, rows: readonly { readonly position: number; readonly board: Uint8Array }[]): CompactionRun[];
}

/**
 * The compactor of a store merging at most `budgetBytes` (and {@link COMPACT_MAX_ROWS} rows) at once.
 *
 * Why a window placed at its newest position keeps every reader right: the window is consecutive in its
 * life's order (no update of that life lies between its rows), and the merged update holds exactly what
 * its rows held. A reader whose cursor is before the window gets that content at once at the window's
 * end, after the other sessions' and lives' items in between, which do not touch this doc, and before
 * anything of this life that came after it, as it did. A reader inside the window has part of it and
 * gets all of it again, which Yjs applies once. A reader after it sees nothing new. A subset with another
 * row of the life between its rows would still end right, but could hand a reader that row before
 * content it builds on, which Yjs then holds pending, and a page boundary there would leave it only in
 * memory.
 */
export function createBoardCompactor(budgetBytes: number): BoardCompactor {
  const logged = new Set<string>();
  return {
    window: () => compactionWindow(budgetBytes),
    merge(userId, sessionId, rows) {
      const runs: CompactionRun[] = [];
      const logOnce = (key: string, message: string): void => {
        if (logged.has(key)) return;
        logged.add(key);
        console.error(`tabula-server: ${message}`);
      };
      const mergeRun = (run: readonly { position: number; board: Uint8Array }[]): void => {
        if (run.length < 2) return;
        const merged = Y.mergeUpdates(run.map((row) => row.board));
        // What is stored is served. Updates that each pass can merge into one that does not: an item
        // whose origin is in another of them, or an id two of them hold, lands in the blackboard map
        // once they meet. Halves are tried instead, down to pairs, so the rest still merges.
        const problem = findBoardUpdateProblem(merged, NO_BOARD_UPDATE_LIMITS);
        if (problem === null) {
          runs.push({ positions: run.map((row) => row.position), merged });
          return;
        }
        logOnce(
          JSON.stringify([userId, sessionId, 'merge']),
          `board updates of user ${userId}, session ${sessionId} merge into an update the board rule refuses (${problem.message}); compaction keeps them apart`,
        );
        if (run.length === 2) return;
        const half = run.length >> 1;
        mergeRun(run.slice(0, half));
        mergeRun(run.slice(half));
      };
      let run: { position: number; board: Uint8Array }[] = [];
      for (const row of rows) {
        const problem = findBoardUpdateProblem(row.board, NO_BOARD_UPDATE_LIMITS);
        if (problem === null) {
          run.push(row);
          continue;
        }
        mergeRun(run);
        run = [];
        logOnce(JSON.stringify([userId, row.position]), `board update ${row.position} of user ${userId}, session ${sessionId} is refused by the board rule (${problem.message}); compaction leaves it out`);
      }
      mergeRun(run);
      return runs;
    },
  };
}

function compactionWindow(budgetBytes: number): CompactionWindow {
  const rows: { position: number; bytes: number }[] = [];
  let total = 0;
  return {
    offer(position, bytes) {
      const fits = (): boolean => total + bytes <= budgetBytes && rows.length < COMPACT_MAX_ROWS;
      if (!fits()) {
        if (rows.length >= 2) return false;
        // Too few rows to merge before this one: start the window later (the oldest run that fits).
        while (rows.length > 0 && !fits()) total -= rows.shift()!.bytes;
        if (!fits()) return true;
      }
      rows.push({ position, bytes });
      total += bytes;
      return true;
    },
    positions: () => (rows.length >= 2 ? rows.map((row) => row.position) : []),
  };
}
