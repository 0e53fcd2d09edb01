/**
 * `TabulaAgentsSession`: the conversation history of an OpenAI Agents SDK
 * run, kept in a Tabula session. Items live in that session's memory scope
 * `'openai-agents'`, one key per item in history order (see `codec.ts`), so
 * every write is an op: durable when its promise resolves, visible to every
 * tab, synced with the rest of the session.
 *
 * Each method is one `memory.transact()`: a history transaction checks its
 * operation id and its expected suffix and applies its items in the same
 * IndexedDB transaction, so two tabs can never both apply one, and a failed
 * check writes nothing.
 *
 * The items that have a chat equivalent (see `chat-messages.ts`) are kept
 * in `session.messages()` too, in item order, by the same transaction that
 * changes the items: Tabula's context tools and token counts see the same
 * conversation. Under `c:<item key>` the scope records which message
 * stands for the item group starting at that key, with a digest of it; each
 * write re-derives the chat view and, from the first group that differs,
 * removes the old messages (`message.remove`, tombstoned, so a replayed
 * append cannot bring one back) and appends the new ones, so the session's
 * messages follow pops, replaced suffixes and clears.
 */
import type { AgentInputItem, SessionHistoryTransactionArgs, SessionHistoryTransactionAwareSession } from '@openai/agents-core';
import { TabulaError, stableKey, type JsonValue, type MemoryTransaction, type Session, type Tabula } from '../index.js';
import { toChatGroups } from './chat-messages.js';
import { CHAT_PREFIX, ITEM_PREFIX, OPERATION_PREFIX, decodeItem, encodeItem, nextItemKeys, operationKey, shortHash } from './codec.js';

/** Options of {@link TabulaAgentsSession}. */
export interface TabulaAgentsSessionOptions {
  /** An open Tabula; the session does not close it. */
  tabula: Tabula;
  /** The Tabula session that holds the history (created on first use). */
  sessionId: string;
  /** @default the Tabula's userId */
  userId?: string;
}

/** The memory scope that holds the items. */
export const AGENTS_SCOPE = 'openai-agents';

/** The record of an applied history transaction: a digest of it, not the items again. */
type OperationRecord = { digest: string; type: string; at: number };

function checkItems(items: unknown, what: string): AgentInputItem[] {
  if (!Array.isArray(items)) throw new TabulaError('argument/invalid', `${what} must be an array of agent items, got ${typeof items}.`);
  items.forEach((item, index) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new TabulaError('argument/invalid', `${what}[${index}] must be an agent item object, got ${JSON.stringify(item)}.`);
    }
  });
  return items as AgentInputItem[];
}

type ChatRecord = { id: string; digest: string };

function isChatRecord(value: JsonValue | undefined): value is ChatRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && typeof value.id === 'string' && typeof value.digest === 'string';
}

/**
 * Brings the session's messages in line with the chat view of the items:
 * keeps the leading groups whose record matches, removes the messages of
 * the rest and appends the new ones after them, so messages keep item order.
 */
async function syncChatMessages(tx: MemoryTransaction): Promise<void> {
  const items = await tx.entries(ITEM_PREFIX);
  const wanted = toChatGroups(items.map(([, value]) => decodeItem(value) as AgentInputItem)).map(({ start, message }) => ({
    key: `${CHAT_PREFIX}${items[start]![0]}`,
    digest: shortHash(stableKey(message)),
    message,
  }));
  const recorded = await tx.entries(CHAT_PREFIX);
  let same = 0;
  while (same < wanted.length && same < recorded.length) {
    const [key, value] = recorded[same]!;
    if (key !== wanted[same]!.key || !isChatRecord(value) || value.digest !== wanted[same]!.digest) break;
    same++;
  }
  const stale = recorded.slice(same);
  await tx.removeMessages(stale.flatMap(([, value]) => (isChatRecord(value) ? [value.id] : [])));
  for (const [key] of stale) await tx.delete(key);
  const fresh = wanted.slice(same);
  const stored = await tx.appendMessages(fresh.map((group) => group.message));
  for (let i = 0; i < fresh.length; i++) await tx.set(fresh[i]!.key, { id: stored[i]!.id, digest: fresh[i]!.digest } satisfies ChatRecord);
}

function writerTag(): string {
  return Math.random().toString(36).slice(2, 8).padEnd(6, '0');
}

/**
 * A `Session` for `@openai/agents` / `@openai/agents-core` (≥ 0.20) that
 * keeps its items in Tabula. Pass it to `run(agent, input, { session })`.
 */
export class TabulaAgentsSession implements SessionHistoryTransactionAwareSession {
  readonly #tabula: Tabula;
  readonly #sessionId: string;
  readonly #userId: string | undefined;
  // Distinguishes this writer's item keys from another tab's or device's written in the same millisecond.
  readonly #tag = writerTag();
  #session: Promise<Session> | null = null;

  constructor(options: TabulaAgentsSessionOptions) {
    if (typeof options.tabula?.session !== 'function') {
      throw new TabulaError('argument/invalid', 'new TabulaAgentsSession({ tabula }): tabula must be an open Tabula (from openTabula()).');
    }
    if (typeof options.sessionId !== 'string' || options.sessionId === '') {
      throw new TabulaError('argument/invalid', `new TabulaAgentsSession({ sessionId }): sessionId must be a non-empty string, got ${JSON.stringify(options.sessionId)}.`);
    }
    this.#tabula = options.tabula;
    this.#sessionId = options.sessionId;
    this.#userId = options.userId;
  }

  /** The Tabula session behind this history (its blackboard, notes, state…). */
  session(): Promise<Session> {
    this.#session ??= this.#tabula.session(this.#sessionId, this.#userId === undefined ? {} : { userId: this.#userId }).catch((error: unknown) => {
      this.#session = null;
      throw error;
    });
    return this.#session;
  }

  async #transact<T>(fn: (tx: MemoryTransaction) => Promise<T>): Promise<T> {
    return (await this.session()).memory(AGENTS_SCOPE).transact(fn);
  }

  /** A write: `fn`, then the chat messages brought in line with the items, in one transaction. */
  async #write<T>(fn: (tx: MemoryTransaction) => Promise<T>): Promise<T> {
    return this.#transact(async (tx) => {
      const result = await fn(tx);
      await syncChatMessages(tx);
      return result;
    });
  }

  static async #itemKeys(tx: MemoryTransaction): Promise<string[]> {
    return (await tx.keys()).filter((key) => key.startsWith(ITEM_PREFIX));
  }

  async #append(tx: MemoryTransaction, keys: string[], encoded: JsonValue[]): Promise<void> {
    const fresh = nextItemKeys(keys.at(-1), encoded.length, this.#tag, Date.now());
    for (let i = 0; i < encoded.length; i++) await tx.set(fresh[i]!, encoded[i]!);
  }

  getSessionId(): Promise<string> {
    return Promise.resolve(this.#sessionId);
  }

  /** The newest `limit` items (all when omitted), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    const stored = await this.#transact((tx) => tx.entries(ITEM_PREFIX));
    return (limit === undefined ? stored : stored.slice(-limit)).map(([, value]) => decodeItem(value) as AgentInputItem);
  }

  /** Appends items at the end of the history, all in one write. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const encoded = checkItems(items, 'addItems(items)').map((item, index) => encodeItem(item, `addItems(items)[${index}]`));
    if (encoded.length === 0) return;
    await this.#write(async (tx) => this.#append(tx, await TabulaAgentsSession.#itemKeys(tx), encoded));
  }

  /** Removes and returns the newest item; undefined when the history is empty. */
  async popItem(): Promise<AgentInputItem | undefined> {
    const value = await this.#write(async (tx) => {
      const last = (await TabulaAgentsSession.#itemKeys(tx)).at(-1);
      if (last === undefined) return undefined;
      const stored = await tx.get(last);
      await tx.delete(last);
      return stored;
    });
    return value === undefined ? undefined : (decodeItem(value) as AgentInputItem);
  }

  /** Drops every item, the chat messages that stood for them, and the record of applied history transactions. */
  async clearSession(): Promise<void> {
    await this.#write(async (tx) => {
      for (const key of await tx.keys()) if (key.startsWith(ITEM_PREFIX) || key.startsWith(OPERATION_PREFIX)) await tx.delete(key);
    });
  }

  /**
   * Applies `append_items` or `replace_suffix` atomically, once per
   * `operationId`: repeating an operation with the same transaction does
   * nothing; with a different transaction, or when the history no longer
   * ends with `expectedSuffix`, it throws `session/conflict` and writes nothing.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction } = args ?? ({} as Partial<SessionHistoryTransactionArgs>);
    if (typeof operationId !== 'string' || operationId === '') {
      throw new TabulaError('argument/invalid', `applyHistoryTransaction(): operationId must be a non-empty string, got ${JSON.stringify(operationId)}.`);
    }
    let encoded: { type: 'append_items'; items: JsonValue[] } | { type: 'replace_suffix'; expectedSuffix: JsonValue[]; replacement: JsonValue[] };
    if (transaction?.type === 'append_items') {
      encoded = { type: 'append_items', items: checkItems(transaction.items, 'transaction.items').map((item) => encodeItem(item, 'transaction.items[]')) };
    } else if (transaction?.type === 'replace_suffix') {
      encoded = {
        type: 'replace_suffix',
        expectedSuffix: checkItems(transaction.expectedSuffix, 'transaction.expectedSuffix').map((item) => encodeItem(item, 'transaction.expectedSuffix[]')),
        replacement: checkItems(transaction.replacement, 'transaction.replacement').map((item) => encodeItem(item, 'transaction.replacement[]')),
      };
    } else {
      throw new TabulaError(
        'argument/invalid',
        `applyHistoryTransaction(): transaction.type must be "append_items" or "replace_suffix", got ${JSON.stringify((transaction as { type?: unknown } | undefined)?.type)}.`,
      );
    }
    const digest = shortHash(stableKey(encoded));
    const key = operationKey(operationId);
    await this.#write(async (tx) => {
      const previous = await tx.get(key);
      if (previous !== undefined) {
        if (typeof previous === 'object' && previous !== null && !Array.isArray(previous) && previous.digest === digest) return;
        throw new TabulaError(
          'session/conflict',
          `History operation "${operationId}" of session "${this.#sessionId}" was already applied with a different transaction; nothing was written. Use a new operationId for a new transaction.`,
        );
      }
      const keys = await TabulaAgentsSession.#itemKeys(tx);
      if (encoded.type === 'append_items') {
        await this.#append(tx, keys, encoded.items);
      } else {
        const start = keys.length - encoded.expectedSuffix.length;
        const suffix = start < 0 ? null : await Promise.all(keys.slice(start).map((k) => tx.get(k)));
        if (suffix === null || stableKey(suffix) !== stableKey(encoded.expectedSuffix)) {
          throw new TabulaError(
            'session/conflict',
            `History operation "${operationId}" of session "${this.#sessionId}" expected the history to end with ${encoded.expectedSuffix.length} item(s) it no longer ends with (another tab or run changed it); nothing was written. Read the items again and retry.`,
          );
        }
        for (const stale of keys.slice(start)) await tx.delete(stale);
        // New keys follow the replaced ones (not the kept prefix), so a replica that missed the delete still orders them last.
        await this.#append(tx, keys, encoded.replacement);
      }
      const record: OperationRecord = { digest, type: encoded.type, at: Date.now() };
      await tx.set(key, record);
    });
  }
}
