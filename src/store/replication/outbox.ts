/**
 * The user's outbox, whole: how a write queues its ops (numbered without a
 * gap, in the write's own transaction), and how the sync engine takes them,
 * has them acknowledged, and sets aside ("parks") one the server refuses on
 * its own, with the items behind it numbered one down so nothing waits
 * behind it. The engine sees items, never rows or the database. What a
 * write may queue (the op size the server takes) is checked here too; when
 * to push, and what the server said, is the engine's business.
 */
import { TabulaError } from '../../core/errors.js';
import type { JsonValue } from '../../core/json.js';
import type { CheckpointMessage, CheckpointSnapshot, Op, OpBody } from '../../core/ops.js';
import type { WriteRequests } from '../requests.js';
import { checkRow, type OutboxRow } from '../db/rows.js';
import { userOutbox, type TabulaDb } from '../db/schema.js';
import type { OutboxItem, ParkedItem } from './contract.js';
import { syncNames } from './keys.js';

/**
 * The largest op a synced write may make, in bytes of its JSON (UTF-8): the sync server's default
 * `maxBodyBytes` (1 MiB) less the push's envelope (`maxOpBytes(DEFAULT_SYNC_LIMITS)` in the protocol;
 * a test holds the two equal). Larger would be refused by the server on every push; the store refuses
 * it when it is written instead (`sync/too-large`), and nothing of that write lands.
 */
export const MAX_OP_BYTES = 1024 * 1024 - 4096;

/**
 * Queues ops (or board updates) of `userId` for sync in the caller's transaction (its requests:
 * `dexieRequests(db)` inside a Dexie transaction), numbered 1, 2, 3… per user with no gap (the server
 * refuses gaps): the user's seq counter lives in meta, so an aborted write takes its numbers back with
 * it. Returns the rows queued. `counter` is the counter's row read earlier in the same transaction (a
 * write issues it with its first requests, so the numbering costs no round trip of its own); by default
 * it is read here.
 */
export async function queueOutbox(
  requests: WriteRequests,
  userId: string,
  items: readonly (Op | { board: { sessionId: string; update: string; after?: string } })[],
  counter?: PromiseLike<{ value: unknown } | undefined>,
): Promise<OutboxRow[]> {
  if (items.length === 0) return [];
  const key = syncNames.seq(userId);
  const last = await (counter ?? requests.meta.get(key));
  let seq = typeof last?.value === 'number' ? last.value : 0;
  const rows = items.map((item): OutboxRow => ('board' in item ? { seq: ++seq, userId, board: item.board } : { seq: ++seq, userId, op: item }));
  const [refused] = await Promise.all([requests.outbox.bulkAdd(rows), requests.meta.put({ key, value: seq })]);
  // A seq already taken means the counter is behind the outbox (other code changed the database): pushing
  // would skip or repeat ops, so the write fails (storage/failed) and lands nothing.
  if (refused.size > 0) throw new DOMException(`The sync outbox already holds seq ${[...refused].map((position) => rows[position]?.seq).join(', ')} of user "${userId}"`, 'ConstraintError');
  return rows;
}

/**
 * Throws `sync/too-large` when `op` is larger than {@link MAX_OP_BYTES} as JSON: the sync server would
 * refuse it. Names the op, its session and its largest body field, and says what to do.
 */
export function checkOpSize(op: Op): void {
  const json = JSON.stringify(op);
  // A UTF-16 code unit is at most 3 bytes of UTF-8: most ops are under the limit without counting.
  if (json.length * 3 <= MAX_OP_BYTES) return;
  const bytes = utf8Length(json);
  if (bytes <= MAX_OP_BYTES) return;
  let field = '';
  let fieldBytes = 0;
  for (const [key, value] of Object.entries(op.body as Record<string, unknown>)) {
    const size = utf8Length(JSON.stringify(value) ?? '');
    if (size > fieldBytes) [field, fieldBytes] = [key, size];
  }
  // A checkpoint is split into ops under the limit by whole messages (splitCheckpoint): one over it holds a
  // message too large for any op (as its append would have been), named here, or a prefix and state that are.
  if (op.kind === 'checkpoint.part' && op.body.messages.length === 1) field = `messages, message "${op.body.messages[0]?.id}"`;
  const hint: Partial<Record<Op['kind'], string>> = {
    'message.append': 'keep large files out of messages (store them elsewhere and put their URL in the message, not a data: URL)',
    'checkpoint.create': 'compact the prefix and state before checkpointing',
    'checkpoint.part': 'remove or shorten the message named (a checkpoint is split by whole messages)',
    'journal.append': 'apply the journal entries in smaller batches',
    'memory.set': 'keep smaller values in memory (a large value belongs in a file of its own)',
  };
  throw new TabulaError(
    'sync/too-large',
    `The ${op.kind} of session "${op.sessionId}" of user "${op.userId}" is ${bytes} bytes as JSON (body.${field}: ${fieldBytes}), over the ${MAX_OP_BYTES} bytes one op may hold to sync (the sync server takes bodies of at most 1 MiB); nothing of this write was stored. ${hint[op.kind] ?? 'Write less at once'}.`,
  );
}

/** Room left in every op for what its body does not hold (id, kind, user, session, order, life) beyond their measured size: a copy (adopt) may rename the user. */
const ENVELOPE_SLACK_BYTES = 2048;

/**
 * The ops a checkpoint is written as: its head (`checkpoint.create`: prefix, state, label, time and the
 * first messages) and, when the whole would be over {@link MAX_OP_BYTES}, `checkpoint.part` bodies with
 * the rest, each under the limit, in order (the head's `count` says how many messages there are in all).
 * Every message goes whole into one op: one that alone is over the limit goes into a part of its own,
 * which a synced write then refuses by its id ({@link checkOpSize}), as its append would have been. The
 * split depends only on what it is given, so every device that re-uploads a checkpoint splits it alike
 * (and a replica assembles any split by position anyway).
 */
export function splitCheckpoint(
  target: { userId: string; sessionId: string; after?: string },
  head: { id: string; label: string | null; at: number; prefix: CheckpointSnapshot['prefix']; state: CheckpointSnapshot['state'] },
  messages: readonly CheckpointMessage[],
): { create: OpBody<'checkpoint.create'>; parts: OpBody<'checkpoint.part'>[] } {
  const { id, label, at, prefix, state } = head;
  const whole: OpBody<'checkpoint.create'> = { id, label, at, snapshot: { prefix, state, messages: [...messages] } };
  // An op id and an order key of their greatest lengths: the envelope measured is never smaller than the one written.
  const envelope = (body: unknown) => utf8Length(JSON.stringify({ id: 'x'.repeat(128), kind: 'checkpoint.create', userId: target.userId, sessionId: target.sessionId, order: 'x'.repeat(96), after: target.after ?? 'x'.repeat(96), body })) + ENVELOPE_SLACK_BYTES;
  const sizes = messages.map((m) => utf8Length(JSON.stringify(m)) + 1);
  const headBytes = envelope({ ...whole, snapshot: { prefix, state, messages: [] }, count: messages.length });
  if (headBytes + sizes.reduce((sum, size) => sum + size, 0) <= MAX_OP_BYTES) return { create: whole, parts: [] };
  const partBytes = envelope({ id, from: messages.length, messages: [] });
  const chunks: { from: number; end: number }[] = [];
  let from = 0;
  let bytes = headBytes;
  for (const [index, size] of sizes.entries()) {
    // A message starts a new part when it does not fit in this one (and this one has some, or is the head).
    if (bytes + size > MAX_OP_BYTES && (index > from || chunks.length === 0)) {
      chunks.push({ from, end: index });
      from = index;
      bytes = partBytes;
    }
    bytes += size;
  }
  chunks.push({ from, end: messages.length });
  const [first, ...rest] = chunks as [{ from: number; end: number }, ...{ from: number; end: number }[]];
  return {
    create: { id, label, at, snapshot: { prefix, state, messages: messages.slice(first.from, first.end) }, count: messages.length },
    parts: rest.map((chunk) => ({ id, from: chunk.from, messages: messages.slice(chunk.from, chunk.end) })),
  };
}

/** Bytes of `text` in UTF-8 (a lone surrogate counts as the 3 bytes of U+FFFD, as TextEncoder writes it). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code < 0xdc00 && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

/** A parked item as kept in meta: the outbox row itself, and the refusal. */
interface StoredParked {
  id: string;
  seq: number;
  kind: ParkedItem['kind'];
  sessionId: string;
  messageId?: string;
  reason: { code: string; message: string };
  row: OutboxRow;
}

/** The parked items kept in meta (an absent or unreadable value is none). */
function parkedList(stored: unknown): StoredParked[] {
  return Array.isArray(stored) ? (stored as StoredParked[]).filter((entry) => typeof entry === 'object' && entry !== null && typeof entry.id === 'string') : [];
}

/** A parked item as the app sees it, from its record in meta (or in a status message of another tab). */
export function parkedItem({ id, seq, kind, sessionId, messageId, reason }: Omit<StoredParked, 'row'>): ParkedItem {
  return { id, seq, kind, sessionId, ...(messageId === undefined ? {} : { messageId }), reason: new TabulaError(reason.code as TabulaError['code'], reason.message) };
}

/** A random id of 24 hex digits (client ids, parked items). */
export function randomId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The engine's side of one user's outbox (see the module comment); the Replica methods of the same names. */
export interface OutboxReader {
  hand(rows: readonly OutboxRow[]): void;
  take(limits: { readonly maxItems: number; readonly maxBytes: number }): Promise<OutboxItem[]>;
  acknowledge(lastSeq: number): Promise<void>;
  waiting(): Promise<{ pending: number; parked: ParkedItem[] }>;
  park(item: OutboxItem, refusal: TabulaError): Promise<ParkedItem | null>;
  dropParked(id: string): Promise<boolean>;
  /** Forgets the rows handed over and the last acknowledgement: the user's state started over. */
  forget(): void;
}

/** The outbox of `userId` as the sync engine takes from it. */
export function createOutboxReader(db: TabulaDb, userId: string, maxHanded: number): OutboxReader {
  const parkedKey = syncNames.parked(userId);
  /**
   * Outbox rows that this tab's writes committed since the last push, handed over by their nudge: a
   * push sends them without reading them back when they continue what the server acknowledged.
   */
  let handed: OutboxRow[] = [];
  /** The last seq the server acknowledged; null before the first push and after one that did not end in an acknowledgement. */
  let acked: number | null = null;
  /** The row each item taken was made of: the one that must still be at its seq to be parked. */
  const rowOf = new WeakMap<OutboxItem, OutboxRow>();

  /**
   * The handed-over rows when they are the outbox's head: seq acked+1, acked+2… without a gap. A row of
   * another tab in between, or no acknowledgement yet, leaves the push to read the outbox. Takes them
   * either way (the outbox holds them too).
   */
  const takeHanded = (): OutboxRow[] | null => {
    const rows = handed;
    handed = [];
    if (acked === null) return null;
    const fresh = rows.filter((row) => row.userId === userId && row.seq > (acked as number));
    return fresh.length > 0 && fresh.every((row, i) => row.seq === (acked as number) + 1 + i) ? fresh : null;
  };

  const readParked = async () => parkedList((await db.meta.get(parkedKey))?.value).map(parkedItem);

  return {
    hand(rows) {
      // More than a push holds goes through the outbox anyway (a large import): not worth keeping.
      handed = handed.length + rows.length > maxHanded ? [] : [...handed, ...rows];
    },
    async take({ maxItems, maxBytes }) {
      // A write this tab just committed goes out without a read of the outbox before it (a round trip
      // less between the write and the server); the read that follows the push finds anything else.
      const rows = takeHanded() ?? (await userOutbox(db, userId).limit(maxItems).toArray());
      const items: OutboxItem[] = [];
      let bytes = 0;
      for (const raw of rows) {
        if (items.length === maxItems) break;
        const row = checkRow('outbox', [raw.userId, raw.seq], raw);
        // Only ever with its own user's token: a row of another user would put their data in this account.
        if (row.userId !== userId) throw new TabulaError('schema/invalid', `Outbox row ${JSON.stringify([raw.userId, raw.seq])} is not of user "${userId}"; nothing was pushed.`);
        const item: OutboxItem = row.op ? { seq: row.seq, op: row.op } : { seq: row.seq, board: row.board };
        // The server counts the body in UTF-8 bytes: text in most scripts is 2–3 of them a character.
        const size = utf8Length(JSON.stringify(item)) + 16;
        if (items.length > 0 && bytes + size > maxBytes) break;
        items.push(item);
        rowOf.set(item, raw);
        bytes += size;
      }
      // Until the server answers, nothing says what it holds.
      if (items.length > 0) acked = null;
      return items;
    },
    async acknowledge(lastSeq) {
      acked = lastSeq;
      await db.outbox.where('[userId+seq]').between([userId, -Infinity], [userId, lastSeq], true, true).delete();
    },
    async waiting() {
      const [pending, parked] = await Promise.all([userOutbox(db, userId).count(), readParked()]);
      return { pending, parked };
    },
    async park(item, refusal) {
      const row = rowOf.get(item);
      if (!row) return null;
      const op = row.op;
      const messageId = op && (op.kind === 'message.append' || op.kind === 'message.update' || op.kind === 'message.remove') ? op.body.id : undefined;
      const entry: StoredParked = {
        id: randomId(),
        seq: row.seq,
        kind: op ? op.kind : 'board',
        sessionId: op ? op.sessionId : (row.board?.sessionId ?? ''),
        ...(messageId === undefined ? {} : { messageId }),
        reason: { code: refusal.code, message: refusal.message },
        row,
      };
      const parked = await db.transaction('rw', [db.outbox, db.meta], async () => {
        const stored = await db.outbox.get([userId, row.seq]);
        if (!stored || JSON.stringify(stored) !== JSON.stringify(row)) return false;
        const behind = db.outbox.where('[userId+seq]').between([userId, row.seq], [userId, Infinity], false, true);
        const moved = (await behind.toArray()).map((later) => ({ ...later, seq: later.seq - 1 }));
        await db.outbox.where('[userId+seq]').between([userId, row.seq], [userId, Infinity], true, true).delete();
        await db.outbox.bulkAdd(moved);
        const counter = await db.meta.get(syncNames.seq(userId));
        if (typeof counter?.value === 'number') await db.meta.put({ key: syncNames.seq(userId), value: counter.value - 1 });
        const list = await db.meta.get(parkedKey);
        await db.meta.put({ key: parkedKey, value: [...parkedList(list?.value), entry] as unknown as JsonValue });
        return true;
      });
      // Rows handed over before the renumbering name seqs that have moved.
      handed = [];
      return parked ? parkedItem(entry) : null;
    },
    dropParked(id) {
      return db.transaction('rw', db.meta, async () => {
        const list = parkedList((await db.meta.get(parkedKey))?.value);
        const kept = list.filter((entry) => entry.id !== id);
        if (kept.length === list.length) return false;
        await db.meta.put({ key: parkedKey, value: kept as unknown as JsonValue });
        return true;
      });
    },
    forget() {
      acked = null;
      handed = [];
    },
  };
}
