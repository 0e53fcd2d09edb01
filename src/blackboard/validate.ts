/**
 * Checks a Yjs update from another tab or from the sync server before it is
 * applied, with the rule the server stores updates by
 * (`findBoardUpdateProblem` in src/core/board-update/): it decodes
 * completely, stays in the bounds Yjs computes safely, holds no subdocument,
 * and whatever it writes into the blackboard map is JSON. Other root types
 * of the document (a Y.Text used through `doc`, say) are the application's
 * business and pass with any content.
 *
 * No size limits here: a tab's sync step 2 carries the whole board, and a
 * row the server compacted holds many pushes; the server holds each push to
 * `SyncLimits`, and reading is linear in the bytes whatever their number.
 */
import * as Y from 'yjs';
import { BLACKBOARD_MAP, NO_BOARD_UPDATE_LIMITS, findBoardUpdateProblem } from '../core/board-update/index.js';

export { BLACKBOARD_MAP };

/**
 * Why an update is refused, or null when it may be applied. With `doc`, the
 * document it is for, an item whose origin is in the document and not in
 * the update is followed there too: an overwrite of an existing blackboard
 * key is checked as one (the server, which keeps no document, cannot).
 */
export function checkBlackboardUpdate(update: Uint8Array, doc?: Y.Doc): string | null {
  const problem = findBoardUpdateProblem(update, doc === undefined ? NO_BOARD_UPDATE_LIMITS : { ...NO_BOARD_UPDATE_LIMITS, blackboardKeyAt: blackboardKeyIn(doc) });
  return problem?.message ?? null;
}

/** The blackboard key of the item with a given id in `doc`, null for any other struct, undefined when `doc` lacks it. */
function blackboardKeyIn(doc: Y.Doc): (client: number, clock: number) => string | null | undefined {
  return (client, clock) => {
    if (clock >= Y.getState(doc.store, client)) return undefined;
    const struct = Y.getItem(doc.store, Y.createID(client, clock));
    const map = doc.share.get(BLACKBOARD_MAP);
    if (!(struct instanceof Y.Item) || map === undefined || struct.parent !== map) return null;
    return struct.parentSub ?? '';
  };
}
