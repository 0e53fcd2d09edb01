/**
 * Board updates: the one rule for what a Yjs update may hold before the sync server stores it or a client
 * applies it. It reads the update v1 wire format itself (varuints, strings, structs, the ten content
 * kinds, lib0's `writeAny` values, the delete set), so the core needs no Yjs, and it never builds a
 * Y.Doc: the work is linear in the bytes, values nest at most `MAX_JSON_DEPTH` (json.ts) deep, and the
 * first problem ends the read. It accepts exactly the updates Yjs writes (`Y.encodeStateAsUpdate`, an
 * `update` event, `Y.mergeUpdates` of such updates) that keep a board JSON; it refuses what a client
 * must not apply, what could make `Y.mergeUpdates` or `Y.applyUpdate` loop or throw, and what is over
 * the limits. It owns the name of the blackboard map; it does not decode base64 or speak HTTP.
 *
 * What the update alone shows, and what it does not. An item that names its parent (a root type by
 * name, or a nested type by id) shows where it goes. An item with an origin (the item left of it when
 * it was written) or a right origin takes its parent and map key from that item when applied: an
 * overwrite of a blackboard key is such an item, its origin the value it replaces. When that item is in
 * the same update, the chain is followed there (an item whose origin lands on a blackboard-map item is
 * one too, and is checked as one). When it is not, the update does not say where the item goes: a
 * caller holding the document passes {@link BoardUpdateCheck.blackboardKeyAt} to look it up there (the
 * client's tab sync does). The server keeps no document, and a client checks a pulled page before it
 * opens the boards, as the server checks a push: an overwrite of an existing key with a Y.Text passes
 * both. Nor does any check see an item that reuses an id the document already holds: Yjs keeps the one
 * it had and skips the other, and items whose origin is that id go where the kept one is.
 *
 * The parts: walk.ts (the runs, structs and delete set, and findBoardUpdateProblem), board-map.ts
 * (where an item goes, and the blackboard map's keys and values), struct-index.ts (the structs read so
 * far, by id), content.ts (the content kinds), any.ts (lib0's `any` values), bytes.ts and utf8.ts
 * (varuints and varstrings within the bytes), problem.ts (how a read stops), check.ts (the limits, and
 * the shapes in and out).
 */
export { BLACKBOARD_MAP } from './board-map.js';
export { DEFAULT_BOARD_UPDATE_LIMITS, NO_BOARD_UPDATE_LIMITS, type BoardUpdateCheck, type BoardUpdateLimits, type BoardUpdateProblem } from './check.js';
export { findBoardUpdateProblem } from './walk.js';
