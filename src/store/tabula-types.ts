/**
 * The shapes `openTabula()` takes and returns: its options and the `Tabula` interface, one doc line per
 * member. tabula.ts implements them.
 */
import type { TabulaError } from '../core/errors.js';
import type { TokenCounter } from '../core/tokens.js';
import type { AdoptResult } from './adopt.js';
import type { SessionChange } from './changes.js';
import type { SyncAdapter, SyncHandle } from './replication/contract.js';
import type { SessionExport } from './session/export-format.js';
import type { Session } from './session/index.js';
import type { StorageEstimate } from './storage-estimate.js';
import type { SessionInfo, SessionOptions } from './types.js';

/** Options of {@link openTabula}; all are optional. */
export interface OpenTabulaOptions {
  /** IndexedDB database name. @default 'tabula' */
  name?: string;
  /** The user of `session()` calls that name none. @default 'anonymous' */
  userId?: string;
  /**
   * Counts tokens for `session.tokens()` and contexts.
   * @default the worker counter (o200k_base, shared worker) where Worker exists, else ApproxTokenCounter
   */
  tokenCounter?: TokenCounter;
  /** Keeps this user's sessions on a sync server: `httpSync({ url, token })` from `tabula-sdk/sync`. */
  sync?: SyncAdapter;
  /** Receives problems that are reported, not thrown: a malformed message from another tab, a failed cache write. @default console.warn */
  onError?: (error: TabulaError) => void;
}

/** An open Tabula database. */
export interface Tabula {
  /** Opens a session, creating it when it does not exist. */
  session(sessionId: string, options?: SessionOptions): Promise<Session>;
  /** The user's sessions, newest (last changed) first. */
  sessions(query?: { userId?: string }): Promise<SessionInfo[]>;
  /** Deletes a session and everything kept with it. */
  deleteSession(sessionId: string, options?: { userId?: string }): Promise<void>;
  /** Recreates a session from `session.export()` output under this Tabula's user (whoever the file names); refuses an id that exists. */
  importSession(data: SessionExport): Promise<Session>;
  /** Storage use of this origin (zeros where the StorageManager API is missing). */
  storage(): Promise<StorageEstimate>;
  /** Asks the browser to keep this origin's data under storage pressure; false where unsupported or refused. */
  requestPersistence(): Promise<boolean>;
  /**
   * Listens to every session's committed changes (this tab, other tabs,
   * sync), e.g. to keep a list of sessions current; returns the unsubscribe
   * function. `session.subscribe()` listens to one session.
   */
  subscribe(listener: (change: SessionChange) => void): () => void;
  /**
   * Moves the sessions of user `fromUserId` on this profile (a guest's, say the default `'anonymous'`
   * before sign-in) to this Tabula's user, as that user's sessions: messages, prefix, state, journal,
   * notes, memory, checkpoints and board, with their ids and order keys. They are queued for sync under
   * this user (when this user syncs here), and the originals are deleted. A session whose id this user
   * already has, or one with a reply still streaming, stays where it is and is listed in `kept`. Each
   * session moves in one transaction and its copy is recognised, so an adopt cut short (a crash, a closed
   * tab) is finished by calling it again.
   */
  adopt(fromUserId: string): Promise<AdoptResult>;
  /** Sync controls and status; null without `openTabula({ sync })`. */
  readonly sync: SyncHandle | null;
  /**
   * Closes the database and everything opened with it: stops sync, interrupts unfinished streams
   * (keeping their text), aborts this tab's runs and closes every session handle; a `tokenCounter` you
   * passed stays open. Every call after it throws `storage/closed`; a second close waits for the first.
   */
  close(): Promise<void>;
}
