/**
 * A session's messages as its handle reads and appends them: every row read
 * is validated (message-row.ts); the handle's first read is made in the
 * transaction `session()` read in while it is alive (open-read.ts); an append
 * is one write over only the stores an append touches (writer.ts). Streams
 * (stream.ts) and runs (runs.ts) build on these appends or write through the
 * same path; removal and ordering rules are store/apply/'s.
 */
import { TabulaError } from '../../core/errors.js';
import { parseMessage, type Message } from '../../core/message.js';
import { checkOptions, describeValue } from '../../core/args.js';
import { applyScope, requireScope, type ContextScope } from '../../core/scopes.js';
import { newId } from '../ids.js';
import { checkMessageRow } from '../message-row.js';
import { readMessageRows } from '../open-read.js';
import { toStoredMessage } from '../stored.js';
import type { StoredMessage } from '../types.js';
import type { HandleScope } from './scope.js';

/** The messages of one handle (plain functions: a run is handed `append`). */
export interface HandleMessages {
  /** `session.messages(options)`: oldest first; `scope` is resolved over the whole session, then `last` keeps the newest. */
  readonly list: (options?: { last?: number; scope?: ContextScope }) => Promise<StoredMessage[]>;
  /** Appends; with `runLife`, only to the session of that life (a run's appends). */
  readonly append: (input: Message | Message[], runLife?: string) => Promise<StoredMessage[]>;
}

function checkLast(last: unknown): number | undefined {
  if (last === undefined) return undefined;
  if (typeof last !== 'number' || !Number.isSafeInteger(last) || last < 0) {
    throw new TabulaError('argument/invalid', `messages({ last }) takes a whole number ≥ 0, got ${describeValue(last)}.`);
  }
  return last;
}

/** The messages of the handle `scope` belongs to; `init.openTx` is the transaction its first read may reuse. */
export function createMessages(scope: HandleScope, init: { openTx?: IDBTransaction | null | undefined }): HandleMessages {
  const { store: { db }, userId, sessionId, label, read, write } = scope;
  let openTx = init.openTx ?? null;

  const readMessages = async (last?: number): Promise<StoredMessage[]> => {
    const reuse = openTx;
    openTx = null;
    const rows = await read('read messages', () => readMessageRows(db, userId, sessionId, last, reuse));
    return rows.map((row) => toStoredMessage(checkMessageRow(row)));
  };

  return {
    async list(options) {
      const { last: lastOption, scope } = checkOptions(options, 'messages(options)');
      const last = checkLast(lastOption);
      if (scope === undefined || scope === null) return readMessages(last);
      const scoped = applyScope(requireScope(scope, 'messages({ scope })'), await readMessages());
      return last === undefined ? scoped : scoped.slice(Math.max(0, scoped.length - last));
    },

    async append(input, runLife) {
      const list = Array.isArray(input) ? input : [input];
      const parsed = list.map((message, index) => parseMessage(message, `append() to ${label}: message[${index}]`));
      if (parsed.length === 0) return [];
      return write(`append ${parsed.length} message(s)`, async (tx) => {
        tx.existing(runLife);
        const createdAt = Date.now();
        const ops = await tx.emitAppends(parsed.map((message) => ({ id: newId(), createdAt, status: 'complete', message })));
        return ops.map((op) => toStoredMessage({ ...op.body, order: op.order }));
      }, 'append');
    },
  };
}
