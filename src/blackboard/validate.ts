/**
 * Checks a Yjs update from another tab before it is applied: it must
 * decode, and whatever it writes into the blackboard map must be JSON.
 * Other root types of the document (a Y.Text used through `doc`, say) are
 * the application's business and pass unchecked.
 */
import * as Y from 'yjs';
import { findJsonProblem } from '../core/json.js';

/** The name of the Y.Map that holds the blackboard in each session's Y.Doc. */
export const BLACKBOARD_MAP = 'blackboard';

/** Why an update is refused, or null when it may be applied. */
export function checkBlackboardUpdate(update: Uint8Array): string | null {
  let decoded: ReturnType<typeof Y.decodeUpdate>;
  try {
    decoded = Y.decodeUpdate(update);
  } catch (error) {
    return `it does not decode as a Yjs update (${error instanceof Error ? error.message : String(error)})`;
  }
  for (const struct of decoded.structs) {
    // In a decoded update a root-level item names its root type by string (the typings say otherwise).
    if (!(struct instanceof Y.Item) || (struct.parent as unknown) !== BLACKBOARD_MAP) continue;
    if (struct.parentSub === null) return 'it inserts into the blackboard map as if it were a list';
    const { content } = struct;
    if (content instanceof Y.ContentDeleted) continue;
    if (!(content instanceof Y.ContentAny)) {
      return `key "${struct.parentSub}" would hold ${content.constructor.name}, not a JSON value`;
    }
    for (const value of content.arr as unknown[]) {
      const problem = findJsonProblem(value);
      if (problem) return `key "${struct.parentSub}" would hold a value that is not JSON (${problem.message})`;
    }
  }
  return null;
}
