/**
 * Run coordination across tabs: names the locks that gate runs and
 * streams, keeps the abort handles of the runs in flight in this tab, and
 * carries `interrupt()` to whichever tab holds a session's run, over a
 * BroadcastChannel. Interrupts are runtime-only: nothing is stored, so an
 * interrupt sent to an idle session affects nothing later. The channel opens
 * on the first run or interrupt: a page that only reads (a new instance
 * showing a chat) does not pay for it (0.05–0.15 ms in Chromium, on openTabula's
 * path).
 *
 * An interrupt names the run the sender saw in flight, when it could tell: a
 * loaded tab may handle the message after that run has ended and the next
 * one has begun, and the next one must not be stopped by it.
 */
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from '../core/errors.js';
import { safeParse } from '../core/validation.js';
import { storeNames } from './db/keys.js';
import { newId } from './ids.js';
import type { Locks } from './locks.js';

/** How long interrupt() waits for the tab that holds the run to answer. */
const INTERRUPT_ACK_TIMEOUT_MS = 1000;

const WireSchema = z.discriminatedUnion('type', [
  z.strictObject({ v: z.literal(1), type: z.literal('interrupt'), id: z.string(), userId: z.string(), sessionId: z.string(), runId: z.nullable(z.string()), reason: z.nullable(z.string()) }),
  z.strictObject({ v: z.literal(1), type: z.literal('ack'), id: z.string() }),
]);

export interface RunCoordinator {
  readonly locks: Locks;
  /**
   * Starts listening for interrupts from other tabs. A run calls it before it asks for its lock, so an
   * interrupt sent once another tab sees the lock held always finds this tab listening.
   */
  listen(): void;
  /** The Web Lock that one run of the session holds. */
  runLockName(userId: string, sessionId: string): string;
  /** The Web Lock a tab holds while it streams a message. */
  streamLockName(userId: string, sessionId: string, messageId: string): string;
  /** Records the run in flight in this tab; returns the function that forgets it. */
  register(userId: string, sessionId: string, runId: string, abort: (reason: string | null) => void): () => void;
  /**
   * Aborts the session's run in whichever tab holds it; false when the session is idle. `inFlight` reads
   * which run holds the session (null when it cannot tell); it is asked only once another tab is seen
   * holding the session's lock, and the message then stops that run only.
   */
  interrupt(userId: string, sessionId: string, reason: string | null, inFlight: () => Promise<string | null>): Promise<boolean>;
  /** Stops listening, settles the interrupts still waiting, and interrupts this tab's runs in flight. */
  close(): void;
}

export function createRunCoordinator(name: string, locks: Locks, onError: (error: TabulaError) => void): RunCoordinator {
  const key = (userId: string, sessionId: string) => JSON.stringify([userId, sessionId]);
  const running = new Map<string, { runId: string; abort: (reason: string | null) => void }>();
  const waiting = new Map<string, (acknowledged: boolean) => void>();
  let channel: BroadcastChannel | null = null;
  let closed = false;

  const onMessage = (event: MessageEvent<unknown>) => {
    const parsed = safeParse(WireSchema, event.data);
    if (!parsed.success) {
      onError(new TabulaError('schema/invalid', `Ignored a malformed run message from another tab: ${describeIssues(parsed.error.issues)}.`, { issues: parsed.error.issues }));
      return;
    }
    const message = parsed.data;
    if (message.type === 'ack') {
      waiting.get(message.id)?.(true);
      return;
    }
    const run = running.get(key(message.userId, message.sessionId));
    // Sent to a run that has ended since (the message was handled late): the run now in flight is not its target.
    if (!run || (message.runId ?? run.runId) !== run.runId) return;
    run.abort(message.reason);
    channel?.postMessage({ v: 1, type: 'ack', id: message.id });
  };

  const listen = (): BroadcastChannel | null => {
    if (!channel && !closed && typeof BroadcastChannel === 'function') {
      channel = new BroadcastChannel(storeNames.runs(name));
      channel.onmessage = onMessage;
    }
    return channel;
  };

  return {
    locks,
    listen: () => void listen(),
    runLockName: (userId, sessionId) => storeNames.runLock(name, userId, sessionId),
    streamLockName: (userId, sessionId, messageId) => storeNames.streamLock(name, userId, sessionId, messageId),

    register(userId, sessionId, runId, abort) {
      const k = key(userId, sessionId);
      const run = { runId, abort };
      running.set(k, run);
      return () => {
        if (running.get(k) === run) running.delete(k);
      };
    },

    async interrupt(userId, sessionId, reason, inFlight) {
      const local = running.get(key(userId, sessionId));
      if (local) {
        local.abort(reason);
        return true;
      }
      const held = await locks.held();
      const outgoing = held.includes(storeNames.runLock(name, userId, sessionId)) ? listen() : null;
      if (!outgoing) return false;
      const runId = await inFlight();
      const id = newId();
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve(false);
        }, INTERRUPT_ACK_TIMEOUT_MS);
        waiting.set(id, (acknowledged) => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(acknowledged);
        });
        outgoing.postMessage({ v: 1, type: 'interrupt', id, userId, sessionId, runId, reason });
      });
    },

    close() {
      closed = true;
      // A run in flight cannot write once its Tabula is closed: its fn is told through ctx.signal, so one that
      // follows the signal ends and lets go of the session's lock, instead of holding it until it returns.
      for (const run of [...running.values()]) run.abort('the Tabula was closed');
      running.clear();
      for (const settle of waiting.values()) settle(false);
      waiting.clear();
      channel?.close();
    },
  };
}
