/**
 * Durable streaming of an assistant message. The message row exists from
 * the first moment with status `streaming`; chunks are flushed to it at
 * most every `flushIntervalMs`, so a reload or a crash loses at most that
 * window, and other tabs see the text grow through `subscribe()`.
 *
 * The streaming tab holds a Web Lock named for the message. When that tab
 * closes or crashes the lock is released, and any tab that has the session
 * open (or opens it later) marks the message `interrupted`, keeping every
 * chunk flushed before.
 */
import { describeValue } from '../core/args.js';
import { TabulaError } from '../core/errors.js';
import { parseMessage, type Message } from '../core/message.js';
import { mapStorageError } from './errors.js';
import { newId } from './ids.js';
import { toStoredMessage } from './stored.js';
import type { StoredMessage } from './types.js';
import type { StoreContext } from './context.js';
import { commit, type Emitter } from './writer.js';

/** A message being written chunk by chunk. */
export interface MessageStream {
  /** The message id, the same in every tab. */
  readonly id: string;
  /** Adds text; persisted at the next flush. Throws 'stream/closed' after done() or abort(). */
  write(chunk: string): void;
  /** Flushes, sets the final fields (e.g. tool_calls), marks the message complete; resolves once durable. */
  done(final?: Partial<Message>): Promise<StoredMessage>;
  /** Flushes what was written and marks the message interrupted. */
  abort(reason?: string): Promise<StoredMessage>;
}

/** What `session.stream()` writes: the message the stream appends and how often it persists. */
export interface StreamInit {
  /** Streams write assistant messages only. */
  role: 'assistant';
  /** Author tag of the message. */
  name?: string;
  /** How often chunks are persisted at most. @default 100 */
  flushIntervalMs?: number;
}

export interface StreamDeps {
  store: StoreContext;
  userId: string;
  sessionId: string;
  label: string;
  /** The session life the stream must start on (the handle's); absent: whatever life the session has. */
  life?: string;
}

export async function openStream(deps: StreamDeps, init: StreamInit): Promise<MessageStream> {
  const { store, userId, sessionId, label } = deps;
  if (init?.role !== 'assistant') throw new TabulaError('argument/invalid', "stream() writes assistant messages: pass { role: 'assistant' }.");
  if (init.name !== undefined && (typeof init.name !== 'string' || init.name === '')) {
    throw new TabulaError('argument/invalid', 'stream({ name }) must be a non-empty string when given.');
  }
  const flushIntervalMs = init.flushIntervalMs ?? 100;
  if (typeof flushIntervalMs !== 'number' || !(flushIntervalMs >= 0) || !Number.isFinite(flushIntervalMs)) {
    throw new TabulaError('argument/invalid', `stream({ flushIntervalMs }) must be a number of ms ≥ 0, got ${describeValue(flushIntervalMs)}.`);
  }

  const id = newId();
  const base: Message = { role: 'assistant', content: '', ...(init.name ? { name: init.name } : {}) };

  // Hold the stream's lock for as long as the stream is open; other tabs read its release as "gone".
  let releaseLock: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (releaseLock = resolve));
  await new Promise<void>((granted, refused) => {
    store.coordinator.locks
      .request(store.coordinator.streamLockName(userId, sessionId, id), {}, async () => {
        granted();
        await held;
      })
      .catch(refused);
  });

  const write = <T>(what: string, build: Parameters<typeof commit<T>>[4]) => commit(store, userId, sessionId, `${what} (${label})`, build);

  let first;
  try {
    first = await write('start a streamed message', async (tx) => {
      tx.existing(deps.life);
      return tx.emit('message.append', { id, createdAt: Date.now(), status: 'streaming', message: base });
    });
  } catch (error) {
    releaseLock();
    throw error;
  }
  const { order } = first;
  const createdAt = first.kind === 'message.append' ? first.body.createdAt : Date.now();

  let text = '';
  let flushedText = '';
  let lastFlushAt = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let flushing: Promise<void> = Promise.resolve();
  let closed = false;
  let failure: TabulaError | null = null;

  /**
   * The stream's row, which must still be streaming: clearContext() or restore() in any tab may have
   * removed it (or replaced it with a checkpoint's copy), and a write that changes nothing must not
   * report success for text that is not stored.
   */
  const ownRow = async (tx: Emitter) => {
    tx.existing();
    const current = await store.db.messages.get([userId, sessionId, id]);
    if (!current || current.status !== 'streaming') {
      throw new TabulaError(
        'stream/dropped',
        `Streamed message ${id} of ${label} is no longer stored as streaming: clearContext() or restore() removed or replaced it while it streamed. ` +
          'Its text was not saved; append it again if it is still wanted.',
      );
    }
  };

  const flush = async () => {
    if (text === flushedText) return;
    const content = text;
    try {
      await write('flush a streamed message', async (tx) => {
        await ownRow(tx);
        await tx.emit('message.update', { id, status: 'streaming', message: { ...base, content }, order, createdAt });
      });
      flushedText = content;
      lastFlushAt = Date.now();
    } catch (error) {
      failure = mapStorageError(error, `flush stream ${id}`);
      store.onError(failure);
    }
  };

  const schedule = () => {
    if (timer !== null) return;
    const waitMs = Math.max(0, lastFlushAt + flushIntervalMs - Date.now());
    timer = setTimeout(() => {
      timer = null;
      flushing = flushing.then(flush);
    }, waitMs);
  };

  const finish = async (status: 'complete' | 'interrupted', final: Partial<Message>): Promise<StoredMessage> => {
    if (closed) throw new TabulaError('stream/closed', `Stream ${id} is already finished.`);
    // Checked before closing: a bad final field leaves the stream open to be finished correctly.
    // Once closed, no write can change the text, so this is the message that gets stored.
    const message = parseMessage({ ...base, content: text, ...final }, `the final message of stream ${id}`);
    closed = true;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    try {
      await flushing;
      await write(status === 'complete' ? 'complete a streamed message' : 'interrupt a streamed message', async (tx) => {
        await ownRow(tx);
        await tx.emit('message.update', { id, status, message, order, createdAt });
      });
      return toStoredMessage({ id, order, status, createdAt, message });
    } finally {
      store.openStreams.delete(stream);
      releaseLock();
    }
  };

  const stream: MessageStream = {
    id,
    write(chunk) {
      if (closed) throw new TabulaError('stream/closed', `Stream ${id} is finished; write() after done() or abort() is refused.`);
      if (typeof chunk !== 'string') throw new TabulaError('argument/invalid', `stream.write() takes a string chunk, got ${typeof chunk}.`);
      if (failure) throw failure;
      text += chunk;
      schedule();
    },
    done(final = {}) {
      if (typeof final !== 'object' || final === null || Array.isArray(final)) {
        return Promise.reject(new TabulaError('argument/invalid', 'done(final) takes an object of message fields.'));
      }
      if ('role' in final && final.role !== 'assistant') {
        return Promise.reject(
          new TabulaError('argument/invalid', `done(final) of stream ${id}: a stream writes an assistant message; final.role ${describeValue(final.role)} is refused.`),
        );
      }
      return finish('complete', final);
    },
    abort() {
      return finish('interrupted', {});
    },
  };
  store.openStreams.add(stream);
  return stream;
}
