import { expect, vi } from 'vitest';
import { openTabula, type OpenTabulaOptions, type Session, type Tabula } from '../../../src/index.js';
import type { OpKind } from '../../../src/core/ops.js';
import { TabulaError } from '../../../src/core/errors.js';
import type { TabulaDb } from '../../../src/store/db/schema.js';
import { checkRow } from '../../../src/store/db/rows.js';

let counter = 0;

/** A database name no other test uses. */
export function uniqueName(prefix = 'test'): string {
  counter += 1;
  return `${prefix}-${Date.now().toString(36)}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Opens a fresh Tabula on fake-indexeddb; errors reported (not thrown) are collected. */
export async function freshTabula(options: OpenTabulaOptions = {}): Promise<Tabula & { reported: Error[]; dbName: string }> {
  const reported: Error[] = [];
  const dbName = options.name ?? uniqueName();
  const tabula = await openTabula({ onError: (error) => reported.push(error), ...options, name: dbName });
  return Object.assign(tabula, { reported, dbName });
}

/**
 * Polls `condition` every 5 ms until it holds; fails after `timeoutMs` (for events from another "tab").
 * The default is sized for a loaded machine: only an event that never comes should fail a test.
 */
export async function waitFor(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * A stored row without `life`, the one field local to a replica by design (a session row's life is
 * the order of the create that made this replica's row; it names the board database): for comparing
 * replicas table by table.
 */
export function withoutLife<T extends object>(row: T): Omit<T, 'life'> {
  const { life: _life, ...rest } = row as T & { life?: unknown };
  return rest;
}

/**
 * Checks the stream marker of every message row (MessageRow.streaming): each row reads back valid, and
 * the sparse stream index, which crash recovery reads, lists exactly the rows whose status is 'streaming'.
 */
export async function expectStreamIndexExact(db: TabulaDb): Promise<void> {
  const rows = await db.messages.toArray();
  for (const row of rows) checkRow('messages', [row.userId, row.sessionId, row.id], row);
  const indexed = await db.messages.orderBy('[userId+sessionId+streaming]').primaryKeys();
  const streaming = rows.filter((row) => row.status === 'streaming').map((row) => JSON.stringify([row.userId, row.sessionId, row.id]));
  expect(indexed.map((key) => JSON.stringify(key)).sort()).toEqual(streaming.sort());
}

/** Writes a row straight into IndexedDB, past Tabula's validation, as foreign code or a bug could. */
export function rawPut(dbName: string, store: string, row: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(dbName);
    request.onerror = () => reject(request.error ?? new Error('open failed'));
    request.onsuccess = () => {
      const db = request.result;
      const tx = db.transaction(store, 'readwrite');
      tx.objectStore(store).put(row);
      tx.oncomplete = () => {
        db.close();
        resolve();
      };
      tx.onerror = () => reject(tx.error ?? new Error('put failed'));
    };
  });
}

/** Overwrites a stored message of session "s" (anonymous user) with one whose content is a number, as foreign code could. */
export function corruptMessage(dbName: string, stored: { id: string; order: string }): Promise<void> {
  return rawPut(dbName, 'messages', {
    id: stored.id,
    userId: 'anonymous',
    sessionId: 's',
    order: stored.order,
    createdAt: 1,
    status: 'complete',
    message: { role: 'user', content: 42 },
  });
}

/** Resolves at the next change of `session` that applied an op of `kind` (a stream's flush: 'message.update'), then stops listening. */
export function nextChange(session: Session, kind: OpKind): Promise<void> {
  return new Promise((resolve) => {
    const stop = session.subscribe((change) => {
      if (!change.kinds.includes(kind)) return;
      stop();
      resolve();
    });
  });
}

/**
 * Makes every IndexedDB read and write request fail at once, as a broken disk would (a DOMException, not
 * a TabulaError), until the mocks are restored (`vi.restoreAllMocks()`).
 */
export function failStorage(): void {
  const fail = () => {
    throw new DOMException('disk on fire', 'UnknownError');
  };
  for (const name of ['get', 'getAll', 'getAllKeys', 'put', 'add', 'delete', 'count', 'openCursor', 'openKeyCursor'] as const) {
    if (name in IDBObjectStore.prototype) vi.spyOn(IDBObjectStore.prototype, name as 'get').mockImplementation(fail);
    if (name in IDBIndex.prototype) vi.spyOn(IDBIndex.prototype, name as 'get').mockImplementation(fail);
  }
}

/** Whether the zod schema of message rows accepts `value` (what the hand-written check is held equal to). */
export function zodAcceptsMessageRow(value: unknown): boolean {
  try {
    checkRow('messages', 'key', value);
    return true;
  } catch (error) {
    if (error instanceof TabulaError && error.code === 'schema/invalid') return false;
    throw error;
  }
}

/** What a check says of its input: 'accepted', or the TabulaError's code and message (anything else named as such). */
export function verdictOf(check: () => unknown): string {
  try {
    check();
    return 'accepted';
  } catch (error) {
    return error instanceof TabulaError ? `${error.code}: ${error.message}` : `not a TabulaError: ${String(error)}`;
  }
}
