/**
 * How a read of a board update ends at its first problem: the {@link Stop} every reader throws, which
 * `findBoardUpdateProblem` catches, and one constructor per way an update goes wrong, so every message of
 * a kind reads the same. It decides nothing about which updates are wrong; the readers do.
 */
import type { BoardUpdateProblem } from './check.js';

/** Thrown inside the reader to end it with a problem; caught by `findBoardUpdateProblem`. */
export class Stop extends Error {
  constructor(readonly problem: BoardUpdateProblem) {
    super(problem.message);
  }
}

/** An update Yjs cannot read. */
export function malformed(at: number, what: string): Stop {
  return new Stop({ kind: 'malformed', message: `it does not decode as a Yjs update (${what}, at byte ${at})` });
}

/** An update Yjs reads but never writes, and mishandles: `what` says how. */
export function unlike(at: number, what: string): Stop {
  return new Stop({ kind: 'malformed', message: `it is not an update Yjs writes (${what}, at byte ${at})` });
}

/** A number past the bound. */
export function unsafe(at: number, what: string): Stop {
  return new Stop({
    kind: 'malformed',
    message: `it holds ${what}, past Number.MAX_SAFE_INTEGER (at byte ${at}), where Yjs's clock arithmetic rounds and Y.mergeUpdates can loop forever`,
  });
}

/** An update that decodes but would put in the doc what a board must not hold: `message` says what. */
export function refused(message: string): Stop {
  return new Stop({ kind: 'refused', message });
}
