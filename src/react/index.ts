/**
 * `tabula-sdk/react`: `TabulaProvider` and hooks that read sessions,
 * messages, blackboards, token counts and sync status live across tabs,
 * built on `useSyncExternalStore`. Peer dependency: `react` 18 or 19.
 */
export { TabulaProvider, useBlackboard, useMessages, useSession, useSessions, useSyncStatus, useTabula, useTokens } from './hooks.js';
export type { TabulaProviderProps } from './hooks.js';
export { createLiveQuery } from './live-query.js';
export type { LiveQuery, QueryState } from './live-query.js';
