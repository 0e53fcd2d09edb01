/**
 * Who last wrote each blackboard key: a second Y.Map in the session's
 * Y.Doc, written in the same Yjs transaction as the key itself, so the two
 * travel together to every tab (and device) and never disagree. The
 * blackboard API stays untouched; this is the demo's own bookkeeping.
 */
import type { Blackboard, JsonValue } from '../../src/index.js';

const WRITERS_MAP = 'demo:writers';

/** The author of a key's current value. */
export interface Writer {
  /** e.g. "ann · device 2 · tab 3f9a" or "agent (scripted) · device 1 · tab 3f9a". */
  readonly by: string;
  /** ms since the epoch. */
  readonly at: number;
}

function writers(board: Blackboard) {
  return board.doc.getMap<Writer>(WRITERS_MAP);
}

/** Sets `key` and records `by` as its writer, atomically. */
export function setWithWriter(board: Blackboard, key: string, value: JsonValue, by: string): void {
  board.transact(() => {
    board.set(key, value);
    writers(board).set(key, { by, at: Date.now() });
  });
}

/** Deletes `key` and its writer, atomically. */
export function deleteWithWriter(board: Blackboard, key: string): void {
  board.transact(() => {
    board.delete(key);
    writers(board).delete(key);
  });
}

/** Replaces the whole board with `values`, recording `by` for every key that changed. */
export function replaceBoard(board: Blackboard, values: Record<string, JsonValue>, by: string): void {
  board.transact(() => {
    for (const key of board.keys()) if (!(key in values)) deleteWithWriter(board, key);
    for (const [key, value] of Object.entries(values)) {
      if (JSON.stringify(board.get(key)) !== JSON.stringify(value)) setWithWriter(board, key, value, by);
    }
  });
}

/** The last recorded writer of `key`, if any. */
export function writerOf(board: Blackboard, key: string): Writer | undefined {
  const writer = writers(board).get(key);
  return writer && typeof writer.by === 'string' && typeof writer.at === 'number' ? writer : undefined;
}
