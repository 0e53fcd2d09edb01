/**
 * Tells the sync leader, in whichever tab of this profile it runs, that a
 * session's blackboard holds a new change made here. The blackboard
 * registry announces a change only once it is stored, so the leader never
 * reads a board before the change is in it. A notice lost to a crash costs
 * nothing: the leader looks at every board when it starts leading.
 */
import { TabulaError } from '../core/errors.js';
import { storeNames } from './db/keys.js';

export interface BoardNotices {
  /** A change to this session's board made in this tab is stored. */
  announce(userId: string, sessionId: string): void;
  /** Calls `listener` for changes announced in this tab or any other; returns the unsubscribe function. */
  subscribe(listener: (userId: string, sessionId: string) => void): () => void;
  close(): void;
}

interface BoardNotice {
  v: 1;
  userId: string;
  sessionId: string;
}

function isBoardNotice(raw: unknown): raw is BoardNotice {
  if (typeof raw !== 'object' || raw === null) return false;
  const m = raw as Record<string, unknown>;
  return m.v === 1 && typeof m.userId === 'string' && typeof m.sessionId === 'string';
}

export function createBoardNotices(name: string, onError: (error: TabulaError) => void): BoardNotices {
  const listeners = new Set<(userId: string, sessionId: string) => void>();
  const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(storeNames.boardChanges(name)) : null;
  const deliver = (userId: string, sessionId: string) => {
    for (const listener of listeners) listener(userId, sessionId);
  };
  if (channel) {
    channel.onmessage = (event: MessageEvent<unknown>) => {
      if (isBoardNotice(event.data)) deliver(event.data.userId, event.data.sessionId);
      else onError(new TabulaError('schema/invalid', 'Ignored a malformed blackboard notice from another tab (expected { v: 1, userId, sessionId }).'));
    };
  }
  return {
    announce(userId, sessionId) {
      deliver(userId, sessionId);
      channel?.postMessage({ v: 1, userId, sessionId } satisfies BoardNotice);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      listeners.clear();
      channel?.close();
    },
  };
}
