/**
 * Keeps the Y.Docs of one session in step across the tabs of an origin,
 * with y-protocols' sync messages over a transport (a BroadcastChannel in
 * the browser; tests plug in a lossy in-memory one):
 * - on start, and every `resyncIntervalMs`, a tab broadcasts step 1 (its
 *   state vector); every other tab answers with step 2 (what the asker
 *   lacks) and, to a broadcast, with its own step 1, so both converge;
 * - every local change is broadcast as an update.
 * A tab that opens late, or missed messages while frozen, catches up at
 * the next step-1 exchange. Frames from other tabs are validated; a bad
 * one is reported and dropped.
 */
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import * as syncProtocol from 'y-protocols/sync';
import * as Y from 'yjs';
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from '../core/errors.js';
import { safeParse } from '../core/validation.js';
import { checkBlackboardUpdate } from './validate.js';

/** A frame between tabs. `to` is null for a broadcast. */
export interface TabFrame {
  /** The frame format's version. */
  v: 1;
  /** The sending tab's peer id. */
  from: string;
  /** The peer id of the one tab meant to read it, or null for every tab. */
  to: string | null;
  /** One y-protocols sync message (step 1, step 2 or update). */
  data: Uint8Array;
}

/** Carries frames between the tabs of one session. */
export interface TabTransport {
  /** Sends a frame to every other tab of the session (each reads `to` itself). */
  post(frame: TabFrame): void;
  /** Registers the one receiver of incoming frames (raw: they are validated by the provider). */
  onFrame(receive: (frame: unknown) => void): void;
  /** Stops sending and receiving; the provider calls it from its own `close()`. */
  close(): void;
}

const FrameSchema = z.strictObject({
  v: z.literal(1),
  from: z.string().check(z.minLength(1)),
  to: z.nullable(z.string().check(z.minLength(1))),
  data: z.instanceof(Uint8Array),
});

/** A transport over a BroadcastChannel named `name`. */
export function broadcastTransport(name: string): TabTransport {
  const channel = new BroadcastChannel(name);
  return {
    post: (frame) => channel.postMessage(frame),
    onFrame(receive) {
      channel.onmessage = (event: MessageEvent<unknown>) => receive(event.data);
    },
    close: () => channel.close(),
  };
}

/** How a {@link TabSyncProvider} reaches the other tabs and where it reports problems. */
export interface TabSyncOptions {
  /** This tab's id in frames. */
  peerId: string;
  /** Carries the frames (a BroadcastChannel per session in the browser). */
  transport: TabTransport;
  /** Receives what is reported, not thrown: a malformed frame from another tab, an observer that threw. */
  onError: (error: TabulaError) => void;
  /** How often to re-exchange state vectors, in case messages were missed; 0 turns it off. @default 10_000 */
  resyncIntervalMs?: number;
}

/** Syncs `doc` with the same session's docs in other tabs. */
export class TabSyncProvider {
  readonly #doc: Y.Doc;
  readonly #peerId: string;
  readonly #transport: TabTransport;
  readonly #onError: (error: TabulaError) => void;
  #timer: ReturnType<typeof setInterval> | null = null;
  #closed = false;
  readonly #onUpdate = (update: Uint8Array, origin: unknown) => {
    // Updates that came from another tab are not echoed back: every tab got the original broadcast.
    if (origin === this || this.#closed) return;
    const encoder = encoding.createEncoder();
    syncProtocol.writeUpdate(encoder, update);
    this.#send(null, encoding.toUint8Array(encoder));
  };
  readonly #onVisible = () => {
    if (typeof document === 'object' && document.visibilityState === 'visible') this.resync();
  };

  constructor(doc: Y.Doc, options: TabSyncOptions) {
    this.#doc = doc;
    this.#peerId = options.peerId;
    this.#transport = options.transport;
    this.#onError = options.onError;
    this.#transport.onFrame((frame) => this.#receive(frame));
    doc.on('update', this.#onUpdate);
    const interval = options.resyncIntervalMs ?? 10_000;
    if (interval > 0) this.#timer = setInterval(() => this.resync(), interval);
    if (typeof document === 'object') document.addEventListener('visibilitychange', this.#onVisible);
  }

  /** Asks every other tab for what this one lacks (and offers what it has). */
  resync(): void {
    if (this.#closed) return;
    const encoder = encoding.createEncoder();
    syncProtocol.writeSyncStep1(encoder, this.#doc);
    this.#send(null, encoding.toUint8Array(encoder));
  }

  #send(to: string | null, data: Uint8Array): void {
    this.#transport.post({ v: 1, from: this.#peerId, to, data });
  }

  #reject(reason: string, cause?: unknown): void {
    this.#onError(new TabulaError('schema/invalid', `Ignored a blackboard message from another tab: ${reason}.`, cause === undefined ? {} : { cause }));
  }

  #receive(raw: unknown): void {
    if (this.#closed) return;
    const parsed = safeParse(FrameSchema, raw);
    if (!parsed.success) return this.#reject(describeIssues(parsed.error.issues));
    const frame = parsed.data;
    if (frame.from === this.#peerId || (frame.to !== null && frame.to !== this.#peerId)) return;
    let update: Uint8Array;
    try {
      const decoder = decoding.createDecoder(frame.data);
      const type = decoding.readVarUint(decoder);
      if (type === syncProtocol.messageYjsSyncStep1) {
        const stateVector = decoding.readVarUint8Array(decoder);
        const reply = encoding.createEncoder();
        syncProtocol.writeSyncStep2(reply, this.#doc, stateVector);
        this.#send(frame.from, encoding.toUint8Array(reply));
        // A broadcast step 1 is a tab (re)joining: ask it for what we lack too.
        if (frame.to === null) {
          const ask = encoding.createEncoder();
          syncProtocol.writeSyncStep1(ask, this.#doc);
          this.#send(frame.from, encoding.toUint8Array(ask));
        }
        return;
      }
      if (type !== syncProtocol.messageYjsSyncStep2 && type !== syncProtocol.messageYjsUpdate) {
        return this.#reject(`unknown sync message type ${type}`);
      }
      update = decoding.readVarUint8Array(decoder);
    } catch (error) {
      return this.#reject('it could not be decoded', error);
    }
    const problem = checkBlackboardUpdate(update, this.#doc);
    if (problem) return this.#reject(problem);
    try {
      // applyUpdate is idempotent: a step 2 that repeats known changes does nothing.
      Y.applyUpdate(this.#doc, update, this);
    } catch (error) {
      // The update decoded and was checked: what threw is an observer the app put on the doc, after the change applied.
      this.#onError(new TabulaError('argument/invalid', 'An observer of the blackboard doc threw while a change from another tab was applied; the change was applied.', { cause: error }));
    }
  }

  /** Stops syncing; the doc stays as it is. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    if (typeof document === 'object') document.removeEventListener('visibilitychange', this.#onVisible);
    this.#doc.off('update', this.#onUpdate);
    this.#transport.close();
  }
}
