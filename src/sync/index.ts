/**
 * `tabula-sdk/sync`: the sync wire protocol shared by the client and the
 * server (schemas, types, paths, limits). The client engine lands here too.
 */
export { httpSync } from './client.js';
export type { HttpSyncOptions } from './client.js';
export type { ParkedItem, SyncAdapter, SyncHandle, SyncStatus } from '../store/replication/contract.js';
export {
  Base64Schema,
  BoardUpdateSchema,
  ClientIdSchema,
  CursorSchema,
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
  SeqSchema,
  parseWire,
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
