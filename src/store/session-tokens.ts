/**
 * Token counting for a session, incremental: each message's count is
 * cached on its row (per counter), and the session row keeps a running
 * total up to an order key. After one append, `tokens()` reads and counts
 * that one message. The total is dropped whenever a message at or before
 * its order changes (clear, restore, an out-of-order sync), and rebuilt
 * from the per-row cache, counting only rows that have none.
 */
import type { Message } from '../core/message.js';
import { PrefixContext } from '../core/prefix.js';
import type { TokenCounter, TokenMeasure } from '../core/tokens.js';
import { mapStorageError } from './errors.js';
import { sessionRange } from './db/schema.js';
import { checkRow, type MessageRow, type SessionRow, type TokenTotal } from './db/rows.js';
import type { StoreContext } from './context.js';

async function countEach(counter: TokenCounter, messages: readonly Message[]): Promise<TokenMeasure[]> {
  if (messages.length === 0) return [];
  // A counter that can fall back to an estimate says so per message; estimates are never cached.
  if (counter.measureEach) return counter.measureEach(messages);
  const counts = counter.countEach ? await counter.countEach(messages) : await Promise.all(messages.map((message) => counter.count([message])));
  return counts.map((tokens) => ({ tokens, exact: true }));
}

export interface SessionTokensInput {
  store: StoreContext;
  userId: string;
  sessionId: string;
  label: string;
  readRow: () => Promise<SessionRow>;
}

/** Prefix + messages of the session, by the store's counter. */
export async function countSessionTokens({ store, userId, sessionId, label, readRow }: SessionTokensInput): Promise<number> {
  const { db, tokenCounter: counter } = store;
  // A previous call may still be caching its counts; start from them rather than recount.
  if (store.background.size > 0) await Promise.allSettled([...store.background]);
  const row = await readRow();
  const cached = row.tokenTotals[counter.name];
  const [lower, upper] = sessionRange(userId, sessionId);

  let rows: MessageRow[];
  try {
    const index = db.messages.where('[userId+sessionId+order]');
    // With a running total only the messages after it are read; without one, all of them.
    rows = cached ? await index.between([userId, sessionId, cached.upTo], upper, false, true).toArray() : await index.between(lower, upper).toArray();
  } catch (error) {
    throw mapStorageError(error, `count tokens of ${label}`);
  }
  for (const r of rows) checkRow('messages', [r.userId, r.sessionId, r.id], r);

  const uncached = rows.filter((r) => r.tokens?.[counter.name] === undefined);
  const measures = await countEach(counter, uncached.map((r) => r.message));
  uncached.forEach((r, i) => {
    r.tokens = { ...r.tokens, [counter.name]: (measures[i] as TokenMeasure).tokens };
  });

  let messagesTotal = cached?.total ?? 0;
  for (const r of rows) messagesTotal += r.tokens?.[counter.name] as number;
  const prefixTokens = await counter.count(new PrefixContext(row.prefix).asMessages());

  const last = rows.at(-1);
  // Nothing is cached when any count is an estimate (a timed-out worker): the next call counts again.
  if ((last || !cached) && measures.every((m) => m.exact)) {
    const next: TokenTotal = {
      total: messagesTotal,
      upTo: last?.order ?? cached?.upTo ?? '',
      messages: (cached?.messages ?? 0) + rows.length,
    };
    // Not awaited: the count is already right, and caching it only saves time on the next call.
    // close() waits for it, so a reopened session finds the counts.
    const caching = saveTotals(store, userId, sessionId, row, uncached, next)
      .catch((error: unknown) => {
        if (!store.closed) store.onError(mapStorageError(error, `cache token counts of ${label}`));
      })
      .finally(() => store.background.delete(caching));
    store.background.add(caching);
  }
  return prefixTokens + messagesTotal;
}

/**
 * Writes per-row counts and the running total, unless the session changed
 * underneath (another write moved `lastOrder` or dropped the total).
 */
async function saveTotals(
  store: StoreContext,
  userId: string,
  sessionId: string,
  seen: SessionRow,
  counted: MessageRow[],
  next: TokenTotal,
): Promise<void> {
  const { db, tokenCounter: counter } = store;
  await db.transaction('rw', [db.sessions, db.messages], async () => {
    const fresh = await db.sessions.get([userId, sessionId]);
    if (!fresh) return;
    for (const r of counted) {
      const current = await db.messages.get([userId, sessionId, r.id]);
      // Cache only if the message is unchanged since it was counted (a streaming message may have grown).
      if (current && current.tokens?.[counter.name] === undefined && JSON.stringify(current.message) === JSON.stringify(r.message)) {
        await db.messages.put({ ...current, tokens: { ...current.tokens, [counter.name]: r.tokens?.[counter.name] as number } });
      }
    }
    const before = seen.tokenTotals[counter.name];
    const now = fresh.tokenTotals[counter.name];
    const unchanged = fresh.lastOrder === seen.lastOrder && JSON.stringify(before) === JSON.stringify(now);
    if (unchanged) {
      fresh.tokenTotals = { ...fresh.tokenTotals, [counter.name]: next };
      await db.sessions.put(fresh);
    }
  });
  // The row changed outside the op write path: the next append reads it instead of building on the old one.
  store.knownRows.set(userId, sessionId, undefined);
}
