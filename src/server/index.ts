/**
 * `tabula-sdk/server`: the reference sync server (Node only). Create a store,
 * hand it to `createSyncServer`, then `listen()` or call `fetch()`.
 *
 * ```ts
 * const store = sqliteStore('./tabula.db');
 * const server = createSyncServer({ store, auth: { secret: process.env.TABULA_JWT_SECRET! } });
 * const { url } = await server.listen({ port: 8787 });
 * ```
 */
export { createSyncServer } from './server.js';
export type { ListeningServer, SyncServer, SyncServerOptions } from './server.js';
export type { SyncAuth, VerifiedUser } from './auth.js';
export { sqliteStore } from './sqlite-store.js';
export { postgresStore } from './postgres-store.js';
export type { PgPoolLike, PostgresStoreOptions } from './postgres-store.js';
export type { ServerStore, StoreOptions, StoredItem, StorePokeItems, StorePulledItem, StorePullPage, StorePushItem, StorePushResult } from './store.js';
export { DEFAULT_SYNC_LIMITS } from '../sync/protocol.js';
export type { SyncLimits } from '../sync/protocol.js';
