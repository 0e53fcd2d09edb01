/**
 * The session handles a Tabula has handed out, held weakly: an app may call
 * `tabula.session(id)` on every render and drop the result, and the handles
 * it drops are collected with what they hold (the blackboard lease, the
 * change watcher). `tabula.close()` still closes every handle alive.
 *
 * A handle's resources are released by a function that does not reference
 * the handle, run either by `handle.close()`, by `tabula.close()`, or by a
 * FinalizationRegistry once the handle is collected, whichever comes first.
 * A handle stays alive while its blackboard object is (the app may keep
 * only `session.blackboard` and go on writing to it).
 */
import type { TabulaError } from '../core/errors.js';
import { mapStorageError } from './errors.js';
import type { Session } from './session/index.js';

export interface HandleTracker {
  /** Tracks `session`, whose resources `release` frees; returns the session with a `close()` that releases them. */
  track(session: Session, release: () => Promise<void>): Session;
  /** Keeps `session` alive while the app holds its `blackboard` (called when the board is first used). */
  keepAliveWith(blackboard: object, session: Session): void;
  /** Closes every handle still alive and releases the resources of the rest. */
  closeAll(): Promise<void>;
}

/** Combines the releases of one handle; each runs once. */
export function releaseBoth(stop: () => void, release: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | null = null;
  return () => {
    done ??= (async () => {
      stop();
      await release();
    })();
    return done;
  };
}

export function createHandleTracker(onError: (error: TabulaError) => void): HandleTracker {
  let nextToken = 0;
  const releases = new Map<number, () => Promise<void>>();
  const alive = new Map<number, WeakRef<Session>>();
  // Ephemeron: while the app holds a handle's blackboard, the handle (and its lease) stays alive.
  const keepAlive = new WeakMap<object, Session>();

  const releaseToken = (token: number): Promise<void> => {
    const release = releases.get(token);
    releases.delete(token);
    alive.delete(token);
    return release ? release() : Promise.resolve();
  };

  const collected = new FinalizationRegistry<number>((token) => {
    releaseToken(token).catch((error: unknown) => onError(mapStorageError(error, 'release a collected session handle')));
  });

  return {
    track(session, release) {
      const token = nextToken++;
      releases.set(token, release);
      alive.set(token, new WeakRef(session));
      collected.register(session, token, session);
      const close = session.close.bind(session);
      return Object.assign(session, {
        close: async () => {
          collected.unregister(session);
          await close();
          await releaseToken(token);
        },
      });
    },
    keepAliveWith(blackboard, session) {
      keepAlive.set(blackboard, session);
    },
    async closeAll() {
      const open = [...alive.values()].map((ref) => ref.deref()).filter((session): session is Session => session !== undefined);
      await Promise.all(open.map((session) => session.close()));
      await Promise.all([...releases.keys()].map((token) => releaseToken(token)));
    },
  };
}
