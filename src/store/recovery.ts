/**
 * Cleans up after tabs that closed or crashed: a run still marked
 * `running` whose session lock nobody holds becomes `abandoned`, and a
 * message still `streaming` whose stream lock nobody holds becomes
 * `interrupted` (its flushed text kept). For streams whose lock another
 * tab still holds, a watcher waits on that lock and does the same the
 * moment it is released without the message being finished.
 */
import { mapStorageError } from './errors.js';
import { findUnfinished, type Unfinished } from './open-read.js';
import type { StoreContext } from './context.js';
import { commit } from './writer.js';

export interface Recovery {
  /**
   * Checks one session now (from `found` when the caller has read it: session() reads it with the
   * session row, in one round trip, see open-read.ts); starts watchers for streams held by live tabs.
   */
  check(userId: string, sessionId: string, found?: Unfinished): Promise<void>;
  /** Like check(), coalescing bursts (many appends from another tab) into one pass. */
  schedule(userId: string, sessionId: string): void;
  close(): void;
}

export function createRecovery(store: StoreContext): Recovery {
  const { db, coordinator } = store;
  const closing = new AbortController();
  const watched = new Set<string>();
  const pending = new Map<string, Promise<void>>();
  const again = new Set<string>();

  const interruptStream = (userId: string, sessionId: string, id: string) =>
    commit(store, userId, sessionId, `mark stream ${id} interrupted`, async (tx) => {
      if (!tx.row()) return;
      // Read inside the transaction: the last flush before the tab died is the text we keep.
      const current = await db.messages.get([userId, sessionId, id]);
      if (current?.status === 'streaming') {
        await tx.emit('message.update', { id, status: 'interrupted', message: current.message, order: current.order, createdAt: current.createdAt });
      }
    });

  const watch = (userId: string, sessionId: string, id: string) => {
    const name = coordinator.streamLockName(userId, sessionId, id);
    if (watched.has(name)) return;
    watched.add(name);
    coordinator.locks
      .request(name, { signal: closing.signal }, () => interruptStream(userId, sessionId, id))
      .catch((error: unknown) => {
        if (!closing.signal.aborted) store.onError(mapStorageError(error, `watch stream ${id}`));
      })
      .finally(() => watched.delete(name));
  };

  async function check(userId: string, sessionId: string, found?: Unfinished): Promise<void> {
    // Read the rows before the locks: a stream appends its row only after taking its lock,
    // so a row we see belongs to a lock that is either still held below or already gone.
    const { runs, streams } = found ?? (await findUnfinished(db, userId, sessionId));
    if (runs.length === 0 && streams.length === 0) return;
    const held = new Set(await coordinator.locks.held());
    if (runs.length > 0 && !held.has(coordinator.runLockName(userId, sessionId))) {
      await db.transaction('rw', db.runs, async () => {
        for (const run of runs) {
          const current = await db.runs.get(run.runId);
          if (current?.status === 'running') await db.runs.put({ ...current, status: 'abandoned', endedAt: Date.now() });
        }
      });
    }
    for (const stream of streams) {
      if (held.has(coordinator.streamLockName(userId, sessionId, stream.id))) watch(userId, sessionId, stream.id);
      else await interruptStream(userId, sessionId, stream.id);
    }
  }

  function schedule(userId: string, sessionId: string): void {
    const key = JSON.stringify([userId, sessionId]);
    if (pending.has(key)) {
      again.add(key);
      return;
    }
    const pass = check(userId, sessionId)
      .catch((error: unknown) => {
        if (!store.closed) store.onError(mapStorageError(error, `recover session "${sessionId}"`));
      })
      .finally(() => {
        pending.delete(key);
        if (again.delete(key) && !store.closed) schedule(userId, sessionId);
      });
    pending.set(key, pass);
  }

  return {
    check,
    schedule,
    close() {
      closing.abort();
      again.clear();
    },
  };
}
