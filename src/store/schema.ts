/**
 * The IndexedDB schema (Dexie), its versions, and the shapes of the rows.
 *
 * Rows read back are validated before use: IndexedDB is shared with every
 * other script of the origin and with older versions of this code, so a
 * row can be anything. A bad row gives `schema/invalid` naming the table,
 * the key and the field; other rows stay readable.
 *
 * Versions: `STORES` is the current version's full schema. A change that
 * only adds or drops indexes or tables edits it and bumps `SCHEMA_VERSION`;
 * a change that rewrites rows adds a version with an upgrade function,
 * which is then kept forever (see STORES).
 */
import { Dexie, type Collection, type EntityTable, type Table } from 'dexie';
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from '../core/errors.js';
import { JsonValueSchema, type JsonValue } from '../core/json.js';
import { MessageSchema, type Message } from '../core/message.js';
import { safeParse } from '../core/validation.js';
import {
  CheckpointSnapshotSchema,
  MessageStatusSchema,
  OpSchema,
  PrefixDataSchema,
  StateFieldsSchema,
  type CheckpointSnapshot,
  type MessageStatus,
  type Op,
  type PrefixData,
  type StateFields,
} from '../core/ops.js';
import { BOARD_QUEUED_PREFIX, LEGACY_SYNC_KEYS, syncNames } from './replication/keys.js';

/** Token totals cached on the session row, per counter: valid for messages up to `upTo`. */
export interface TokenTotal {
  total: number;
  upTo: string;
  messages: number;
}

export interface SessionRow {
  userId: string;
  sessionId: string;
  version: number;
  prefix: PrefixData;
  /** Order key of the prefix.set that wrote the prefix ('' = never set). */
  prefixOrder: string;
  /** Order key of the last op that wrote the summary (a save with a summary, a clear, a restore). */
  summaryOrder: string;
  /** Order key of the session.create op; an older session.delete does not apply. */
  createdOrder: string;
  /**
   * This replica's life of the session: the order key of the create that made this row. It names the
   * blackboard database and binds a run to the session; unlike `createdOrder`, an earlier create from
   * another device does not move it. Rows written before it existed use `createdOrder` (see {@link lifeOf}).
   */
  life?: string;
  /**
   * The life's place among the session's lives: the order key of the delete it began after ('' for a
   * first life), the same on every replica; every op written in this life carries it (see `Op.after`).
   * While a row has it, the session's tombstone equals it. Rows created before lives were named have
   * none, and their ops none either.
   */
  after?: string;
  /** Messages ordered before this key were dropped by a clear or a restore; an append ordered before it is refused. */
  clearedBefore: string;
  state: StateFields;
  messageCount: number;
  journalCount: number;
  journalWatermark: number;
  /** The greatest watermark a journal.commit asked for; the watermark is this, capped by journalCount (a commit may arrive before its entries). */
  journalCommitted?: number;
  /** Order key of the last entry the greatest journal.commit covers: the watermark counts the entries ordered up to it. */
  journalThrough?: string;
  /** Order key of the state.save or checkpoint.restore that set `version` ('' = none): saves win by (version, order). */
  versionOrder?: string;
  /** The `base` of that save or restore (absent when it named none): a copy of it queued again (sync-seed.ts) names it too. */
  versionBase?: string;
  createdAt: number;
  updatedAt: number;
  /** The greatest op order applied to this session; new local ops sort after it. */
  lastOrder: string;
  forkOf: { userId: string; sessionId: string } | null;
  tokenTotals: Record<string, TokenTotal>;
  /** How many message.remove tombstones the session has; while 0 (or absent), an append skips looking for one. */
  removedMessages?: number;
  /**
   * What this replica has of the life: for each clock that wrote an op of it applied here, the greatest
   * order key of that clock (an HLC key), sorted by clock id. A delete made here carries it (see
   * `session.delete`'s `seen`). Only rows of a named life (`after`) created since it exists have it.
   */
  seen?: string[];
}

export interface MessageRow {
  id: string;
  userId: string;
  sessionId: string;
  order: string;
  createdAt: number;
  status: MessageStatus;
  message: Message;
  /** Cached token counts by counter name; absent until the message is first counted. */
  tokens?: Record<string, number>;
  /** Order key of the message.update that wrote status and message (absent: the append did). */
  updateOrder?: string;
  /**
   * 1 exactly while `status` is 'streaming', absent otherwise: the index on [userId+sessionId+streaming]
   * then holds only unfinished streams (what crash recovery looks for), and a finished message (nearly
   * all of them) costs no entry in it. IndexedDB leaves out of an index a row whose key path does not
   * resolve. Set by {@link messageRow}.
   */
  streaming?: 1;
}

/**
 * A message row with its `streaming` marker matching its status and no cached token counts (a new or
 * changed message has none). Every write of a message row goes through here, so the marker never lies.
 */
export function messageRow(fields: Omit<MessageRow, 'streaming' | 'tokens'> & { tokens?: unknown; streaming?: unknown }): MessageRow {
  const { tokens: _tokens, streaming: _streaming, ...row } = fields;
  return fields.status === 'streaming' ? { ...row, streaming: 1 } : row;
}

export interface JournalRow {
  id: string;
  userId: string;
  sessionId: string;
  order: string;
  entry: JsonValue;
}

export interface NoteRow {
  id: string;
  userId: string;
  sessionId: string;
  order: string;
  text: string;
  runId: string | null;
  scope: string | null;
  at: number;
}

export interface MemoryRow {
  userId: string;
  sessionId: string;
  scope: string;
  key: string;
  /** null with `deleted` = a tombstone, so an older set cannot bring the key back. */
  value: JsonValue | null;
  deleted: boolean;
  order: string;
}

export interface RunRow {
  runId: string;
  userId: string;
  sessionId: string;
  scope: string;
  visit: number;
  attempt: number;
  status: 'running' | 'succeeded' | 'failed' | 'interrupted' | 'abandoned';
  startedAt: number;
  endedAt: number | null;
}

export interface CheckpointRow {
  id: string;
  userId: string;
  sessionId: string;
  label: string | null;
  at: number;
  order: string;
  snapshot: CheckpointSnapshot;
}

/**
 * A queued item for the sync server: an op, written in the op's own transaction, or a blackboard
 * update (base64), the part of a board the server has not been sent yet, queued by the sync leader.
 * Every row names its user, whose sync pushes it with that user's token, under that user's seq (1, 2,
 * 3… per user: the primary key is [userId+seq]); an op row's user is its op's.
 */
export type OutboxRow =
  | { seq: number; userId: string; op: Op; board?: undefined }
  | { seq: number; userId: string; op?: undefined; board: { sessionId: string; update: string; after?: string } };

export interface MetaRow {
  key: string;
  value: JsonValue;
}

/** The Dexie database of one `openTabula({ name })`. */
export type TabulaDb = Dexie & {
  sessions: Table<SessionRow, [string, string]>;
  messages: Table<MessageRow, [string, string, string]>;
  journal: EntityTable<JournalRow, 'id'>;
  notes: EntityTable<NoteRow, 'id'>;
  memory: Table<MemoryRow, [string, string, string, string]>;
  runs: EntityTable<RunRow, 'runId'>;
  checkpoints: EntityTable<CheckpointRow, 'id'>;
  outbox: Table<OutboxRow, [string, number]>;
  meta: EntityTable<MetaRow, 'key'>;
};

/** The current schema version; bump it with a new `db.version(n)` below. */
export const SCHEMA_VERSION = 6;

/**
 * The stores of the current version (6). History: v2 added the `[userId+sessionId+status]` indexes, to
 * find a session's streaming messages and running runs without scanning them all (recovery after a tab
 * closed mid-stream or mid-run); v4 replaced the messages' status index with the sparse stream index
 * (see {@link MessageRow.streaming}), which costs a write nothing for a finished message (the status index
 * held an entry for every message: a third of a bulk append's index writes); v6 keys the outbox by
 * [userId+seq] (it was `++seq`, one numbering for the profile), so each user's rows are numbered and
 * pushed apart (v5 is the step on the way, see {@link createDb}).
 *
 * Dexie (3 and later) upgrades from whatever version is installed by comparing the stores it finds with
 * the declared ones, so only the versions whose upgrade must run are declared: every version declared is
 * built on each `openTabula()`. A later version that rewrites rows adds its `upgrade()`; one that only
 * changes indexes needs nothing more.
 */
export const STORES = {
  sessions: '[userId+sessionId], [userId+updatedAt]',
  messages: '[userId+sessionId+id], [userId+sessionId+order], [userId+sessionId+streaming]',
  journal: 'id, [userId+sessionId+order]',
  notes: 'id, [userId+sessionId+order]',
  memory: '[userId+sessionId+scope+key], [userId+sessionId+scope]',
  runs: 'runId, [userId+sessionId+scope], [userId+sessionId+status]',
  checkpoints: 'id, [userId+sessionId]',
  outbox: '[userId+seq]',
  meta: 'key',
} as const;

/** Where v5 holds the outbox's rows while the outbox is made again with its new key (IndexedDB cannot change a store's key). */
const OUTBOX_MOVING = 'outboxMoving';

/** Opens (creating or upgrading) the database. */
export function createDb(name: string): TabulaDb {
  // Tabula announces its own changes (changes.ts) and runs no liveQuery: Dexie's query cache and its
  // observability layer (which computes the key ranges of every write and posts them to every tab on
  // a BroadcastChannel of its own) would only add work to each write.
  const db = new Dexie(name, { cache: 'disabled' }) as TabulaDb;
  db.unuse({ stack: 'dbcore', name: 'Observability' });
  // Two steps, run in one upgrade transaction (a database never stays at v5): v5 moves the outbox's rows
  // aside, each given its user, and drops the store; v6 makes the store again under its new key and moves
  // them back. A fresh database is created at v6 directly; a v6 one runs neither.
  db.version(SCHEMA_VERSION - 1)
    .stores({ ...STORES, outbox: null, [OUTBOX_MOVING]: '[userId+seq]' })
    .upgrade(async (tx) => {
      // From v2 and earlier: the rows still streaming get their marker. Dexie drops the status index that
      // could find them before this runs, so it reads every message once, on the first open after the update.
      await tx.table('messages').filter((row: { status?: unknown }) => row.status === 'streaming').modify({ streaming: 1 });
      await tx.table(OUTBOX_MOVING).bulkAdd(await outboxPerUser(tx.table('outbox'), tx.table<MetaRow, string>('meta')));
    });
  db.version(SCHEMA_VERSION)
    .stores({ outbox: STORES.outbox, [OUTBOX_MOVING]: null })
    .upgrade(async (tx) => {
      await tx.table('outbox').bulkAdd(await tx.table(OUTBOX_MOVING).toArray());
    });
  return db;
}

/**
 * The rows of an outbox of one numbering (v4 and earlier), each given its user, and the sync state of the
 * meta table made per user (see `syncNames`). The profile's one cursor, seq counter and client id were
 * those of the user who synced here; when that is one user (the users marked seeded and the users of the
 * queued ops are that one), the state and every row, board rows included, are theirs, as they were. When
 * several users synced here, that state was shared and is nobody's: each user starts afresh (a new client
 * id, a pull from the start, both safe to repeat), their op rows numbered 1, 2, 3… in their old order,
 * and board rows, which named no user, are dropped together with every board's record of what was queued,
 * so each user's leader queues each of their boards again, whole, from the board itself.
 */
async function outboxPerUser(outbox: Table, meta: Table<MetaRow, string>): Promise<OutboxRow[]> {
  type OldRow = { seq: number; op?: Op; board?: { sessionId: string; update: string; after?: string } };
  const rows = (await outbox.toArray()) as OldRow[];
  const seededPrefix = syncNames.seeded('');
  const seeded = (await meta.where('key').startsWith(seededPrefix).primaryKeys()).map((key) => key.slice(seededPrefix.length));
  const users = new Set([...seeded, ...rows.flatMap((row) => (typeof row.op?.userId === 'string' ? [row.op.userId] : []))]);
  const [seq, cursor, clientId] = await meta.bulkGet([LEGACY_SYNC_KEYS.seq, LEGACY_SYNC_KEYS.cursor, LEGACY_SYNC_KEYS.clientId]);
  await meta.bulkDelete(Object.values(LEGACY_SYNC_KEYS));
  const [only] = users;
  if (users.size === 1 && only !== undefined) {
    const last = rows.reduce((max, row) => Math.max(max, row.seq), typeof seq?.value === 'number' ? seq.value : 0);
    const kept: MetaRow[] = [{ key: syncNames.seq(only), value: last }];
    if (cursor) kept.push({ key: syncNames.cursor(only), value: cursor.value });
    if (clientId) kept.push({ key: syncNames.clientId(only), value: clientId.value });
    await meta.bulkPut(kept);
    // As they were, numbering and all (a corrupt row too: its push reports it, as it did before).
    return rows.map((row) => ({ ...row, userId: only }) as OutboxRow);
  }
  const counters = new Map<string, number>([...users].map((user) => [user, 0]));
  const moved: OutboxRow[] = [];
  for (const row of rows) {
    // Board rows name no user; a row that is not an op of a user could be pushed by none.
    if (typeof row.op?.userId !== 'string') continue;
    const next = (counters.get(row.op.userId) ?? 0) + 1;
    counters.set(row.op.userId, next);
    moved.push({ seq: next, userId: row.op.userId, op: row.op });
  }
  await meta.bulkPut([...counters].map(([user, last]) => ({ key: syncNames.seq(user), value: last })));
  await meta.where('key').startsWith(BOARD_QUEUED_PREFIX).delete();
  return moved;
}

/** The outbox rows of one user, in seq order (the order they are pushed in). */
export function userOutbox(db: TabulaDb, userId: string): Collection<OutboxRow, [string, number]> {
  return db.outbox.where('[userId+seq]').between([userId, -Infinity], [userId, Infinity]);
}

/** Every table of a session's data, for transactions that touch them all. */
export function sessionTables(db: TabulaDb): Table[] {
  return [db.sessions, db.messages, db.journal, db.notes, db.memory, db.runs, db.checkpoints, db.outbox, db.meta];
}

/** The meta key of a deleted session's tombstone (its value: the delete's order key). */
export function tombstoneKey(userId: string, sessionId: string): string {
  return `deleted:${JSON.stringify([userId, sessionId])}`;
}

/** The meta key prefix of a session's removed-message tombstones. */
export function removedMessagePrefix(userId: string, sessionId: string): string {
  return `removed:${JSON.stringify([userId, sessionId])}:`;
}

/** The meta key of a removed message's tombstone (its value: the greatest order of a remove of it). */
export function removedMessageKey(userId: string, sessionId: string, id: string): string {
  return removedMessagePrefix(userId, sessionId) + id;
}

/** The meta key prefix of a session's message-update registers. */
export function messageUpdatesPrefix(userId: string, sessionId: string): string {
  return `updates:${JSON.stringify([userId, sessionId])}:`;
}

/**
 * The meta key of a message's update register: the latest message.update of each status (its order and
 * message), kept while the session lives, so a restore can fold into a copy the updates ordered after it
 * even when they were applied to an original that a clear has dropped since.
 */
export function messageUpdatesKey(userId: string, sessionId: string, id: string): string {
  return messageUpdatesPrefix(userId, sessionId) + id;
}

/** Bounds of a compound index range over one session: [userId, sessionId, *]. */
/** Every session row of a user, as a range of the sessions table's primary key. */
export function userSessionRows(db: TabulaDb, userId: string): Promise<SessionRow[]> {
  return db.sessions.where('[userId+sessionId]').between([userId, Dexie.minKey], [userId, Dexie.maxKey]).toArray();
}

export function sessionRange(userId: string, sessionId: string): [unknown[], unknown[]] {
  return [
    [userId, sessionId, Dexie.minKey],
    [userId, sessionId, Dexie.maxKey],
  ];
}

const OrderSchema = z.string().check(z.minLength(1));

const rowSchemas = {
  sessions: z.object({
    userId: z.string(),
    sessionId: z.string(),
    version: z.number().check(z.int(), z.nonnegative()),
    prefix: PrefixDataSchema,
    prefixOrder: z.string(),
    summaryOrder: z.string(),
    createdOrder: z.string(),
    life: z.optional(z.string()),
    after: z.optional(z.string()),
    clearedBefore: z.string(),
    state: StateFieldsSchema,
    messageCount: z.number().check(z.int(), z.nonnegative()),
    journalCount: z.number().check(z.int(), z.nonnegative()),
    journalWatermark: z.number().check(z.int(), z.nonnegative()),
    journalCommitted: z.optional(z.number().check(z.int(), z.nonnegative())),
    journalThrough: z.optional(z.string()),
    versionOrder: z.optional(z.string()),
    versionBase: z.optional(z.string()),
    createdAt: z.number(),
    updatedAt: z.number(),
    lastOrder: z.string(),
    forkOf: z.nullable(z.object({ userId: z.string(), sessionId: z.string() })),
    tokenTotals: z.record(z.string(), z.object({ total: z.number(), upTo: z.string(), messages: z.number() })),
    removedMessages: z.optional(z.number().check(z.int(), z.nonnegative())),
    seen: z.optional(z.array(z.string())),
  }),
  messages: z.object({
    id: z.string(),
    userId: z.string(),
    sessionId: z.string(),
    order: OrderSchema,
    createdAt: z.number(),
    status: MessageStatusSchema,
    message: MessageSchema,
    tokens: z.optional(z.record(z.string(), z.number())),
    updateOrder: z.optional(z.string()),
    streaming: z.optional(z.literal(1)),
  }).check(
    // A streaming row without its marker would be invisible to crash recovery (see MessageRow.streaming).
    z.refine((row) => (row.streaming === 1) === (row.status === 'streaming'), {
      path: ['streaming'],
      message: "expected 1 exactly when status is 'streaming'",
    }),
  ),
  journal: z.object({ id: z.string(), userId: z.string(), sessionId: z.string(), order: OrderSchema, entry: JsonValueSchema }),
  notes: z.object({
    id: z.string(),
    userId: z.string(),
    sessionId: z.string(),
    order: OrderSchema,
    text: z.string(),
    runId: z.nullable(z.string()),
    scope: z.nullable(z.string()),
    at: z.number(),
  }),
  memory: z.object({
    userId: z.string(),
    sessionId: z.string(),
    scope: z.string(),
    key: z.string(),
    value: z.nullable(JsonValueSchema),
    deleted: z.boolean(),
    order: OrderSchema,
  }),
  checkpoints: z.object({
    id: z.string(),
    userId: z.string(),
    sessionId: z.string(),
    label: z.nullable(z.string()),
    at: z.number(),
    order: OrderSchema,
    snapshot: CheckpointSnapshotSchema,
  }),
  outbox: z.union([
    z.object({ seq: z.number(), userId: z.string(), op: OpSchema }).check(
      // The row's user pushes it: an op of another user would be refused by the server, whole push and all, forever.
      z.refine((row) => row.op.userId === row.userId, { path: ['userId'], message: "expected the op's userId" }),
    ),
    z.object({ seq: z.number(), userId: z.string(), board: z.object({ sessionId: z.string(), update: z.string(), after: z.optional(z.string()) }) }),
  ]),
  runs: z.object({
    runId: z.string(),
    userId: z.string(),
    sessionId: z.string(),
    scope: z.string(),
    visit: z.number().check(z.int(), z.positive()),
    attempt: z.number().check(z.int(), z.positive()),
    status: z.enum(['running', 'succeeded', 'failed', 'interrupted', 'abandoned']),
    startedAt: z.number(),
    endedAt: z.nullable(z.number()),
  }),
} as const;

type RowTypes = {
  sessions: SessionRow;
  messages: MessageRow;
  journal: JournalRow;
  notes: NoteRow;
  memory: MemoryRow;
  checkpoints: CheckpointRow;
  outbox: OutboxRow;
  runs: RunRow;
};

/**
 * Validates a row read from `table`. Throws `schema/invalid` naming the
 * table, the row's key and the bad fields.
 */
export function checkRow<T extends keyof RowTypes>(table: T, key: unknown, row: unknown): RowTypes[T] {
  const result = safeParse(rowSchemas[table], row);
  if (!result.success) {
    throw new TabulaError(
      'schema/invalid',
      `Row ${JSON.stringify(key)} of IndexedDB table "${table}" is corrupt or was written by incompatible code: ` +
        `${describeIssues(result.error.issues)}. Other rows are unaffected; delete or re-import this session to repair it.`,
      { issues: result.error.issues },
    );
  }
  // Validation passed; return the row itself (not zod's copy) to keep identity and skip a clone.
  return row as RowTypes[T];
}

/** The session's life on this replica (see {@link SessionRow.life}). */
export function lifeOf(row: SessionRow): string {
  return row.life ?? row.createdOrder;
}
