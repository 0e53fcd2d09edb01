/**
 * `tabula-sdk/sync`: the sync client (`httpSync`) and the wire protocol it
 * shares with the server: the schema of each request, response and event
 * body, the paths, headers, version and limits. The building blocks of
 * those schemas (ids, cursors, base64) and the parse helper stay internal.
 * test/unit/exports.test.ts pins the list.
 */
export { httpSync } from './client.js';
export type { HttpSyncOptions } from './client.js';
export type { ParkedItem, SyncAdapter, SyncHandle, SyncStatus } from '../store/replication/contract.js';
export {
  DEFAULT_SYNC_LIMITS,
  ErrorResponseSchema,
  PROTOCOL_VERSION,
  PokeEventSchema,
  PullRequestSchema,
  PullResponseSchema,
  PushRequestSchema,
  PushResponseSchema,
  SYNC_HEADERS,
  SYNC_PATHS,
} from './protocol.js';
export type {
  BoardUpdate,
  ErrorResponse,
  HealthResponse,
  PokeEvent,
  PullItem,
  PullRequest,
  PullResponse,
  PushItem,
  PushRequest,
  PushResponse,
  SyncErrorCode,
  SyncLimits,
} from './protocol.js';
