/** The blackboard: a Yjs document per session, persisted in IndexedDB, live in every tab. */
export { createBlackboard } from './blackboard.js';
export type { Blackboard, BlackboardChange, BlackboardInit, ChangeSource } from './blackboard.js';
export { REMOTE_ORIGIN, blackboardDatabaseName } from './lives.js';
export { TabSyncProvider, broadcastTransport } from './tab-provider.js';
export type { TabFrame, TabSyncOptions, TabTransport } from './tab-provider.js';
export { checkBlackboardUpdate, BLACKBOARD_MAP } from './validate.js';
