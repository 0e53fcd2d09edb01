/** What the blackboard tests share: a held load of the board code, and probes of a board's write refusal. */
import type { BoardCode } from '../../../src/blackboard/lazy.js';
import { isTabulaError, type Blackboard } from '../../../src/index.js';

/** A load of the registry module that resolves only when `release()` is called. */
export function heldLoad(): { load: BoardCode; release: () => void; calls: () => number } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let calls = 0;
  return {
    load: async () => {
      calls += 1;
      await gate;
      return import('../../../src/blackboard/registry.js');
    },
    release: () => open(),
    calls: () => calls,
  };
}

/** The code `board.set()` is refused with, or null when it is accepted (it then writes key `probe`). */
export function writeRefusal(board: Blackboard): string | null {
  try {
    board.set('probe', 1);
    return null;
  } catch (error) {
    if (isTabulaError(error)) return error.code;
    throw error;
  }
}

/** True once `board` refuses writes with `session/not-found` (its life ended); throws on any other refusal. */
export function refusesAsDeleted(board: Blackboard): boolean {
  const code = writeRefusal(board);
  if (code !== null && code !== 'session/not-found') throw new Error(`board.set() was refused with ${code}, not session/not-found`);
  return code !== null;
}
