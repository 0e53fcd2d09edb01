/**
 * React bindings: a provider for one open Tabula and hooks that read it
 * live. Every hook subscribes through `useSyncExternalStore`, so renders
 * never tear and React removes every listener on unmount. Nothing
 * suspends: a hook returns `undefined` until its first read lands, and
 * throws the read's error (for an error boundary) if it fails.
 */
import { createContext, createElement, useContext, useEffect, useMemo, useState, useSyncExternalStore, type ReactNode } from 'react';
import { TabulaError, structuralEqual, type JsonValue, type Session, type SessionInfo, type StoredMessage, type Tabula } from '../index.js';
import type { SyncStatus } from '../sync/index.js';
import { createLiveQuery, type LiveQuery, type QueryState } from './live-query.js';

const TabulaContext = createContext<Tabula | null>(null);

/** Props of {@link TabulaProvider}. */
export interface TabulaProviderProps {
  /** An open Tabula (from `openTabula()`); the provider does not close it. */
  tabula: Tabula;
  /** The components that may use the hooks. */
  children?: ReactNode;
}

/** Makes `tabula` available to the hooks below it. */
export function TabulaProvider({ tabula, children }: TabulaProviderProps): ReactNode {
  return createElement(TabulaContext.Provider, { value: tabula }, children);
}

/** The Tabula of the nearest {@link TabulaProvider}; throws `argument/invalid` outside one. */
export function useTabula(): Tabula {
  const tabula = useContext(TabulaContext);
  if (!tabula) {
    throw new TabulaError('argument/invalid', 'useTabula() and the other Tabula hooks need a <TabulaProvider tabula={…}> above the component.');
  }
  return tabula;
}

const IDLE: QueryState<never> = Object.freeze({ status: 'loading' as const });
const idleSubscribe = () => () => undefined;
const idleSnapshot = () => IDLE;

function useLiveQuery<T>(query: LiveQuery<T> | null): T | undefined {
  const state = useSyncExternalStore(query?.subscribe ?? idleSubscribe, query?.getSnapshot ?? idleSnapshot, query?.getSnapshot ?? idleSnapshot);
  if (state.status === 'error') throw state.error;
  return state.status === 'ready' ? state.data : undefined;
}

/** The user's sessions, newest first, kept current as any tab creates, changes or deletes one. */
export function useSessions(query: { userId?: string } = {}): SessionInfo[] | undefined {
  const tabula = useTabula();
  const { userId } = query;
  const live = useMemo(
    () =>
      createLiveQuery(
        (onChange) => tabula.subscribe(onChange),
        () => tabula.sessions(userId === undefined ? {} : { userId }),
      ),
    [tabula, userId],
  );
  return useLiveQuery(live);
}

/**
 * Opens a session for as long as the component is mounted (creating it if
 * needed) and closes its handle on unmount. `undefined` while opening.
 */
export function useSession(sessionId: string, options: { userId?: string } = {}): Session | undefined {
  const tabula = useTabula();
  const { userId } = options;
  const key = JSON.stringify([sessionId, userId ?? null]);
  const [opened, setOpened] = useState<{ key: string; tabula: Tabula; session?: Session; error?: Error } | null>(null);
  useEffect(() => {
    let active = true;
    let handle: Session | null = null;
    tabula.session(sessionId, userId === undefined ? {} : { userId }).then(
      (session) => {
        if (!active) {
          // Unmounted (or StrictMode's rehearsal) before it opened: nobody will close it but us.
          void session.close();
          return;
        }
        handle = session;
        setOpened({ key, tabula, session });
      },
      (error: unknown) => {
        if (active) setOpened({ key, tabula, error: error instanceof Error ? error : new TabulaError('storage/failed', `Could not open session "${sessionId}": ${String(error)}`) });
      },
    );
    return () => {
      active = false;
      if (handle) void handle.close();
    };
  }, [tabula, sessionId, userId, key]);
  if (!opened || opened.key !== key || opened.tabula !== tabula) return undefined;
  if (opened.error) throw opened.error;
  return opened.session;
}

/** The session's messages, oldest first (the newest `last` when given); streaming messages update as they grow. */
export function useMessages(session: Session | undefined, options: { last?: number } = {}): StoredMessage[] | undefined {
  const { last } = options;
  const live = useMemo(
    () =>
      session
        ? createLiveQuery(
            (onChange) => session.subscribe(onChange),
            () => session.messages(last === undefined ? {} : { last }),
          )
        : null,
    [session, last],
  );
  return useLiveQuery(live);
}

/** The session's token count (prefix + messages), recounted when it changes. */
export function useTokens(session: Session | undefined): number | undefined {
  const live = useMemo(
    () =>
      session
        ? createLiveQuery(
            (onChange) => session.subscribe(onChange),
            () => session.tokens(),
          )
        : null,
    [session],
  );
  return useLiveQuery(live);
}

interface BoardStore {
  readonly subscribe: (onChange: () => void) => () => void;
  readonly getSnapshot: () => Readonly<Record<string, JsonValue>>;
}

function boardStore(session: Session): BoardStore {
  const board = session.blackboard;
  let snapshot: Readonly<Record<string, JsonValue>> | null = null;
  return {
    subscribe: (onChange) => {
      const invalidate = () => {
        snapshot = null;
        onChange();
      };
      // A change between render and subscribe would otherwise stay hidden behind the render's snapshot.
      if (snapshot && !structuralEqual(snapshot, board.toJSON())) snapshot = null;
      let live = true;
      // The board may still be loading from IndexedDB; what it loads shows once it is in. A failed load
      // was reported through the Tabula's onError; the hook keeps showing what the board holds.
      board.whenLoaded.then(
        () => {
          if (live) invalidate();
        },
        () => undefined,
      );
      const stop = board.observe(invalidate);
      return () => {
        live = false;
        stop();
      };
    },
    getSnapshot: () => {
      // One object per board state, not per call: useSyncExternalStore compares snapshots by identity.
      snapshot ??= Object.freeze(board.toJSON());
      return snapshot;
    },
  };
}

const EMPTY_BOARD: Readonly<Record<string, JsonValue>> = Object.freeze({});
const emptyBoard = () => EMPTY_BOARD;

/** The session's blackboard as an object, live across tabs. */
export function useBlackboard(session: Session | undefined): Readonly<Record<string, JsonValue>> | undefined;
/** One key of the session's blackboard, live across tabs; re-renders only when that key changes. */
export function useBlackboard(session: Session | undefined, key: string): JsonValue | undefined;
export function useBlackboard(session: Session | undefined, key?: string): Readonly<Record<string, JsonValue>> | JsonValue | undefined {
  const store = useMemo(() => (session ? boardStore(session) : null), [session]);
  const whole = useSyncExternalStore(store?.subscribe ?? idleSubscribe, store?.getSnapshot ?? emptyBoard, store?.getSnapshot ?? emptyBoard);
  const value = useSyncExternalStore(
    store?.subscribe ?? idleSubscribe,
    // A key's value keeps its identity while other keys change, so this selector re-renders only for its key.
    () => (key === undefined || !store ? undefined : store.getSnapshot()[key]),
    () => undefined,
  );
  if (!session) return undefined;
  return key === undefined ? whole : value;
}

/** The part of `tabula.sync` this hook reads. */
interface SyncHandleLike {
  status(): SyncStatus;
  subscribe(listener: () => void): () => void;
}

function syncOf(tabula: Tabula): SyncHandleLike | null {
  // Read structurally: the sync client is optional (architecture.md, Layers) and a Tabula without it has no `sync` at all.
  const sync = (tabula as { sync?: unknown }).sync;
  if (typeof sync !== 'object' || sync === null) return null;
  const candidate = sync as Partial<SyncHandleLike>;
  return typeof candidate.status === 'function' && typeof candidate.subscribe === 'function' ? (candidate as SyncHandleLike) : null;
}

const none = () => null;

/** The same parked items: the same list, or lists of the same length whose items have the same ids (an id names a parked item). */
function sameParked(a: SyncStatus['parked'], b: SyncStatus['parked']): boolean {
  return a === b || (a.length === b.length && a.every((item, i) => item.id === b[i]?.id));
}

/**
 * The sync status (`SyncStatus` of `tabula-sdk/sync`, as `tabula.sync.status()` gives it), live: it
 * re-renders when the state, the pending count, the last sync, the error or the parked items change.
 * `null` when this Tabula has no sync.
 */
export function useSyncStatus(): SyncStatus | null {
  const tabula = useTabula();
  const store = useMemo(() => {
    const sync = syncOf(tabula);
    if (!sync) return null;
    let snapshot = sync.status();
    // Keep the old object when nothing changed: a new one per status() call would re-render for nothing.
    const refresh = () => {
      const next = sync.status();
      if (
        next.state !== snapshot.state ||
        next.pending !== snapshot.pending ||
        next.lastSyncedAt !== snapshot.lastSyncedAt ||
        next.error !== snapshot.error ||
        !sameParked(next.parked, snapshot.parked)
      ) {
        snapshot = next;
      }
    };
    return {
      subscribe: (onChange: () => void) => {
        const stop = sync.subscribe(() => {
          refresh();
          onChange();
        });
        // The status may have moved between render and subscribe.
        refresh();
        return stop;
      },
      // Cached between notifications: status() may build a new object per call.
      getSnapshot: () => snapshot,
    };
  }, [tabula]);
  return useSyncExternalStore(store?.subscribe ?? idleSubscribe, store?.getSnapshot ?? none, store?.getSnapshot ?? none);
}
