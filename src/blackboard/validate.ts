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

/**
 * How deeply a blackboard value may nest (arrays and objects). Yjs encodes
 * and decodes values recursively: a value some thousands deep overflows the
 * stack half-way through a transaction (the key is set, the update is not
 * sent), and workers and other engines have smaller stacks than Node's.
 */
export const MAX_BLACKBOARD_DEPTH = 512;

/**
 * The nesting depth of `value` if it is at most `limit`, else `limit + 1`;
 * iterative, so a hostile value cannot overflow the stack here.
 * Cycles count as too deep.
 */
export function nestingDepth(value: unknown, limit = MAX_BLACKBOARD_DEPTH): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop() as [unknown, number];
    if (typeof item !== 'object' || item === null) continue;
    if (depth + 1 > limit) return limit + 1;
    if (depth + 1 > deepest) deepest = depth + 1;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}

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
      if (nestingDepth(value) > MAX_BLACKBOARD_DEPTH) return `key "${struct.parentSub}" would hold a value nested deeper than ${MAX_BLACKBOARD_DEPTH} levels`;
      const problem = findJsonProblem(value);
      if (problem) return `key "${struct.parentSub}" would hold a value that is not JSON (${problem.message})`;
    }
  }
  return null;
}
