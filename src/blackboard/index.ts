/**
 * The blackboard: a Yjs document per session, persisted in IndexedDB, live in
 * every tab. The part of the public `tabula-sdk` entry it re-exports (see
 * src/index.ts); the tab transport, the database names and the update check
 * are internal, imported from their modules.
 */
export { createBlackboard } from './blackboard.js';
export type { Blackboard, BlackboardChange, BlackboardInit, ChangeSource } from './blackboard.js';
