/**
 * Memory: a key-value store per (session, scope) for an agent's
 * bookkeeping, such as a provider's conversation id. Every write is saved
 * at once, in its own transaction, and is never rolled back by a failing
 * run. Deletes leave a tombstone so that an older write arriving later
 * (from another tab or device) cannot bring a key back.
 */
import { TabulaError, formatPath } from '../core/errors.js';
import { KEY_MAX_LENGTH, checkName, findNameProblem } from '../core/names.js';
import { assertSafeKey, findJsonProblem, type JsonValue } from '../core/json.js';
import { parseMessage } from '../core/message.js';
import { describeValue } from '../core/args.js';
import { newId } from './ids.js';
import { toStoredMessage } from './stored.js';
import { mapStorageError } from './errors.js';
import { checkRow, type MemoryRow } from './db/rows.js';
import type { Memory, StoredMessage } from './types.js';
import { assertOpen, type StoreContext } from './context.js';
import { commit } from './writer.js';

/** Checks a memory scope name: 1–128 characters. */
export function checkScope(scope: unknown): string {
  return checkName(scope, 'A memory scope', KEY_MAX_LENGTH);
}

function checkKey(key: unknown): string {
  const problem = findNameProblem(key, KEY_MAX_LENGTH);
  if (problem) throw new TabulaError('memory/bad-key', `A memory key must be a string of 1–${KEY_MAX_LENGTH} characters of valid Unicode: ${problem}.`);
  return assertSafeKey(key as string, 'memory key');
}

function checkValue(key: string, value: unknown): JsonValue {
  if (value === null || value === undefined) {
    throw new TabulaError(
      'memory/bad-value',
      `memory.set(${JSON.stringify(key)}, ${String(value)}): a memory value cannot be ${String(value)}; use memory.delete(${JSON.stringify(key)}) to remove a key.`,
    );
  }
  const problem = findJsonProblem(value);
  if (problem) {
    throw new TabulaError(
      'memory/bad-value',
      `memory.set(${JSON.stringify(key)}, …): the value is not JSON at ${formatPath(problem.path)}: ${problem.message}.`,
      { issues: [problem] },
    );
  }
  return value as JsonValue;
}

/**
 * The Memory of one session and scope; writes throw `session/not-found` once the session is deleted
 * (or, with `life`, once the session of that life (see `lifeOf`) is gone, even if re-created).
 */
export function createMemory(store: StoreContext, userId: string, sessionId: string, scope: string, life?: string): Memory {
  checkScope(scope);
  const where = `memory "${scope}" of session "${sessionId}"`;

  const scopeRows = () => store.db.memory.where('[userId+sessionId+scope]').equals([userId, sessionId, scope]).toArray();
  // A row is validated before anything of it is read, `deleted` included: a corrupt row is reported, never skipped.
  const liveOf = (rows: readonly MemoryRow[]): MemoryRow[] =>
    rows.map((row) => checkRow('memory', [userId, sessionId, scope, row.key], row)).filter((row) => !row.deleted);

  const live = async (): Promise<MemoryRow[]> => {
    assertOpen(store);
    try {
      return liveOf(await scopeRows());
    } catch (error) {
      throw mapStorageError(error, `read ${where}`);
    }
  };

  const write = (what: string, build: Parameters<typeof commit<void>>[4]) => commit(store, userId, sessionId, `${what} in ${where}`, build);

  return {
    async get<T extends JsonValue>(key: string): Promise<T | undefined> {
      checkKey(key);
      assertOpen(store);
      let row: MemoryRow | undefined;
      try {
        row = await store.db.memory.get([userId, sessionId, scope, key]);
      } catch (error) {
        throw mapStorageError(error, `read ${where}`);
      }
      if (!row) return undefined;
      checkRow('memory', [userId, sessionId, scope, key], row);
      return row.deleted ? undefined : (row.value as T);
    },
    async set(key, value) {
      checkKey(key);
      const checked = checkValue(key, value);
      await write(`set key "${key}"`, async (tx) => {
        tx.existing(life);
        await tx.emit('memory.set', { scope, key, value: checked });
      });
    },
    async delete(key) {
      checkKey(key);
      await write(`delete key "${key}"`, async (tx) => {
        tx.existing(life);
        await tx.emit('memory.delete', { scope, key });
      });
    },
    async keys() {
      return (await live()).map((row) => row.key).sort();
    },
    async clear() {
      await write('clear', async (tx) => {
        tx.existing(life);
        for (const row of liveOf(await scopeRows())) await tx.emit('memory.delete', { scope, key: row.key });
      });
    },
    async transact(fn) {
      return commit(store, userId, sessionId, `transact in ${where}`, async (tx) => {
        tx.existing(life);
        const read = async (key: string): Promise<MemoryRow | undefined> => {
          const row = await store.db.memory.get([userId, sessionId, scope, key]);
          return row && checkRow('memory', [userId, sessionId, scope, key], row);
        };
        return fn({
          async get<T extends JsonValue>(key: string) {
            const row = await read(checkKey(key));
            return row && !row.deleted ? (row.value as T) : undefined;
          },
          async set(key, value) {
            checkKey(key);
            await tx.emit('memory.set', { scope, key, value: checkValue(key, value) });
          },
          async delete(key) {
            checkKey(key);
            await tx.emit('memory.delete', { scope, key });
          },
          async keys() {
            return liveOf(await scopeRows()).map((row) => row.key).sort();
          },
          async entries(prefix = '') {
            // Validated only when wanted: a scope may hold many rows the caller filters out by prefix.
            const wanted = (await scopeRows()).filter((row) => row.key.startsWith(prefix));
            return liveOf(wanted)
              .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
              .map((row): [string, JsonValue] => [row.key, row.value]);
          },
          async appendMessages(messages) {
            if (!Array.isArray(messages)) throw new TabulaError('argument/invalid', `tx.appendMessages(messages) in ${where} takes an array of messages, got ${describeValue(messages)}.`);
            const parsed = messages.map((message, index) => parseMessage(message, `tx.appendMessages() in ${where}: message[${index}]`));
            const stored: StoredMessage[] = [];
            for (const message of parsed) {
              const op = await tx.emit('message.append', { id: newId(), createdAt: Date.now(), status: 'complete', message });
              if (op.kind === 'message.append') stored.push(toStoredMessage({ ...op.body, order: op.order }));
            }
            return stored;
          },
          async removeMessages(ids) {
            if (!Array.isArray(ids)) throw new TabulaError('argument/invalid', `tx.removeMessages(ids) in ${where} takes an array of message ids, got ${describeValue(ids)}.`);
            ids.forEach((id, index) => {
              if (typeof id !== 'string' || id === '' || id.length > 128) {
                throw new TabulaError('argument/invalid', `tx.removeMessages(ids) in ${where}: ids[${index}] must be a message id (a string of 1–128 characters, from a StoredMessage), got ${describeValue(id)}.`);
              }
            });
            for (const id of ids as readonly string[]) await tx.emit('message.remove', { id });
          },
        });
      });
    },
  };
}
