/**
 * The rows of Tabula's IndexedDB tables: one zod schema per table, and each
 * row type inferred from its schema, so a field added to one is in the other
 * (the outbox row, whose union names its discriminators, is written out and
 * checked against its schema at compile time).
 *
 * Rows read back are validated before use ({@link checkRow}): IndexedDB is
 * shared with every other script of the origin and with older versions of
 * this code, so a row can be anything. A bad row gives `schema/invalid`
 * naming the table, the key and the field; other rows stay readable.
 *
 * The Dexie schema and its versions are schema.ts; the meta table's keys are
 * keys.ts.
 */
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from '../../core/errors.js';
import { JsonValueSchema, type JsonValue } from '../../core/json.js';
import { MessageSchema } from '../../core/message.js';
import { safeParse } from '../../core/validation.js';
import { CheckpointMessageSchema, CheckpointSnapshotSchema, MessageStatusSchema, OpSchema, PrefixDataSchema, StateFieldsSchema, type Op } from '../../core/ops.js';

const OrderSchema = z.string().check(z.minLength(1));
const CountSchema = z.number().check(z.int(), z.nonnegative());

const TokenTotalSchema = z.object({ total: z.number(), upTo: z.string(), messages: z.number() });
/** Token totals cached on the session row, per counter: valid for messages up to `upTo`. */
export type TokenTotal = z.infer<typeof TokenTotalSchema>;

const SessionRowSchema = z.object({
  userId: z.string(),
  sessionId: z.string(),
  version: CountSchema,
  prefix: PrefixDataSchema,
  /** Order key of the prefix.set that wrote the prefix ('' = never set). */
  prefixOrder: z.string(),
  /** Order key of the last op that wrote the summary (a save with a summary, a clear, a restore). */
  summaryOrder: z.string(),
  /** Order key of the session.create op; an older session.delete does not apply. */
  createdOrder: z.string(),
  /**
   * This replica's life of the session: the order key of the create that made this row. It names the
   * blackboard database and binds a run to the session; unlike `createdOrder`, an earlier create from
   * another device does not move it. Rows written before it existed use `createdOrder` (see {@link lifeOf}).
   */
  life: z.optional(z.string()),
  /**
   * The life's place among the session's lives: the order key of the delete it began after ('' for a
   * first life), the same on every replica; every op written in this life carries it (see `Op.after`).
   * While a row has it, the session's tombstone equals it. Rows created before lives were named have
   * none, and their ops none either.
   */
  after: z.optional(z.string()),
  /** Messages ordered before this key were dropped by a clear or a restore; an append ordered before it is refused. */
  clearedBefore: z.string(),
  state: StateFieldsSchema,
  messageCount: CountSchema,
  journalCount: CountSchema,
  journalWatermark: CountSchema,
  /** The greatest watermark a journal.commit asked for; the watermark is this, capped by journalCount (a commit may arrive before its entries). */
  journalCommitted: z.optional(CountSchema),
  /** Order key of the last entry the greatest journal.commit covers: the watermark counts the entries ordered up to it. */
  journalThrough: z.optional(z.string()),
  /** Order key of the state.save or checkpoint.restore that set `version` ('' = none): saves win by (version, order). */
  versionOrder: z.optional(z.string()),
  /** The `base` of that save or restore (absent when it named none): a copy of it queued again (replication/seed.ts) names it too. */
  versionBase: z.optional(z.string()),
  createdAt: z.number(),
  updatedAt: z.number(),
  /** The greatest op order applied to this session; new local ops sort after it. */
  lastOrder: z.string(),
  forkOf: z.nullable(z.object({ userId: z.string(), sessionId: z.string() })),
  tokenTotals: z.record(z.string(), TokenTotalSchema),
  /** How many message.remove tombstones the session has; while 0 (or absent), an append skips looking for one. */
  removedMessages: z.optional(CountSchema),
  /**
   * What this replica has of the life: for each clock that wrote an op of it applied here, the greatest
   * order key of that clock (an HLC key), sorted by clock id. A delete made here carries it (see
   * `session.delete`'s `seen`). Only rows of a named life (`after`) created since it exists have it.
   */
  seen: z.optional(z.array(z.string())),
});
/** A row of the `sessions` table: one session's head (prefix, state, counters, the order keys the merge rules compare). */
export type SessionRow = z.infer<typeof SessionRowSchema>;

const MessageRowSchema = z
  .object({
    id: z.string(),
    userId: z.string(),
    sessionId: z.string(),
    order: OrderSchema,
    createdAt: z.number(),
    status: MessageStatusSchema,
    message: MessageSchema,
    /** Cached token counts by counter name; absent until the message is first counted. */
    tokens: z.optional(z.record(z.string(), z.number())),
    /** Order key of the message.update that wrote status and message (absent: the append did). */
    updateOrder: z.optional(z.string()),
    /**
     * 1 exactly while `status` is 'streaming', absent otherwise: the index on [userId+sessionId+streaming]
     * then holds only unfinished streams (what crash recovery looks for), and a finished message (nearly
     * all of them) costs no entry in it. IndexedDB leaves out of an index a row whose key path does not
     * resolve. Set by {@link messageRow}.
     */
    streaming: z.optional(z.literal(1)),
  })
  .check(
    // A streaming row without its marker would be invisible to crash recovery (see MessageRow's `streaming`).
    z.refine((row) => (row.streaming === 1) === (row.status === 'streaming'), {
      path: ['streaming'],
      message: "expected 1 exactly when status is 'streaming'",
    }),
  );
/** A row of the `messages` table: one message of a session, keyed [userId+sessionId+id]. */
export type MessageRow = z.infer<typeof MessageRowSchema>;

/**
 * A message row with its `streaming` marker matching its status and no cached token counts (a new or
 * changed message has none). Every write of a message row goes through here, so the marker never lies.
 */
export function messageRow(fields: Omit<MessageRow, 'streaming' | 'tokens'> & { tokens?: unknown; streaming?: unknown }): MessageRow {
  const { tokens: _tokens, streaming: _streaming, ...row } = fields;
  return fields.status === 'streaming' ? { ...row, streaming: 1 } : row;
}

const JournalRowSchema = z.object({ id: z.string(), userId: z.string(), sessionId: z.string(), order: OrderSchema, entry: JsonValueSchema });
/** A row of the `journal` table: one journal entry of a session. */
export type JournalRow = z.infer<typeof JournalRowSchema>;

const NoteRowSchema = z.object({
  id: z.string(),
  userId: z.string(),
  sessionId: z.string(),
  order: OrderSchema,
  text: z.string(),
  runId: z.nullable(z.string()),
  scope: z.nullable(z.string()),
  at: z.number(),
});
/** A row of the `notes` table: one note of a session. */
export type NoteRow = z.infer<typeof NoteRowSchema>;

const MemoryRowSchema = z.object({
  userId: z.string(),
  sessionId: z.string(),
  scope: z.string(),
  key: z.string(),
  /** null with `deleted` = a tombstone, so an older set cannot bring the key back. */
  value: z.nullable(JsonValueSchema),
  deleted: z.boolean(),
  order: OrderSchema,
});
/** A row of the `memory` table: one key of one memory scope of a session, or its tombstone. */
export type MemoryRow = z.infer<typeof MemoryRowSchema>;

const RunRowSchema = z.object({
  runId: z.string(),
  userId: z.string(),
  sessionId: z.string(),
  scope: z.string(),
  visit: z.number().check(z.int(), z.positive()),
  attempt: z.number().check(z.int(), z.positive()),
  status: z.enum(['running', 'succeeded', 'failed', 'interrupted', 'abandoned']),
  startedAt: z.number(),
  endedAt: z.nullable(z.number()),
});
/** A row of the `runs` table: one run of a session. */
export type RunRow = z.infer<typeof RunRowSchema>;

const CheckpointRowSchema = z.object({
  id: z.string(),
  userId: z.string(),
  sessionId: z.string(),
  label: z.nullable(z.string()),
  at: z.number(),
  order: OrderSchema,
  snapshot: CheckpointSnapshotSchema,
  /**
   * Present while the checkpoint is still arriving (its head came, some of its parts not yet): `snapshot`
   * holds the head's messages, `count` how many the whole checkpoint holds, `chunks` the parts that came
   * (by position), `restores` the checkpoint.restore ops that came before it was complete, applied once it
   * is. A complete row has none: it is the whole checkpoint, as one op would have made it.
   */
  pending: z.optional(
    z.object({
      count: CountSchema,
      chunks: z.array(z.object({ from: CountSchema, messages: z.array(CheckpointMessageSchema) })),
      restores: z.array(OpSchema),
    }),
  ),
});
/** A row of the `checkpoints` table: one checkpoint of a session, with what it froze. */
export type CheckpointRow = z.infer<typeof CheckpointRowSchema>;

const OutboxOpRowSchema = z.object({ seq: z.number(), userId: z.string(), op: OpSchema }).check(
  // The row's user pushes it: an op of another user would be refused by the server, whole push and all, forever.
  z.refine((row) => row.op.userId === row.userId, { path: ['userId'], message: "expected the op's userId" }),
);
const OutboxBoardRowSchema = z.object({ seq: z.number(), userId: z.string(), board: z.object({ sessionId: z.string(), update: z.string(), after: z.optional(z.string()) }) });

/**
 * A queued item for the sync server: an op, written in the op's own transaction, or a blackboard
 * update (base64), the part of a board the server has not been sent yet, queued by the sync leader.
 * Every row names its user, whose sync pushes it with that user's token, under that user's seq (1, 2,
 * 3… per user: the primary key is [userId+seq]); an op row's user is its op's.
 *
 * Written out rather than inferred: each member names the other's field as `?: undefined`, so code can
 * test `row.op` on the union. The two `_Outbox…Matches` checks below hold each member to its schema.
 */
export type OutboxRow =
  | { seq: number; userId: string; op: Op; board?: undefined }
  | { seq: number; userId: string; op?: undefined; board: { sessionId: string; update: string; after?: string } };

/** True when A and B are the same type (not only assignable to each other: optional fields and extra fields count). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only when `T` is `true`. */
type Holds<T extends true> = T;
/** Each member of {@link OutboxRow}, without its `?: undefined` discriminator, is its schema's type: the build fails where they drift. */
type _OutboxOpRowMatches = Holds<Same<Omit<Extract<OutboxRow, { op: Op }>, 'board'>, z.infer<typeof OutboxOpRowSchema>>>;
type _OutboxBoardRowMatches = Holds<Same<Omit<Extract<OutboxRow, { board: object }>, 'op'>, z.infer<typeof OutboxBoardRowSchema>>>;

/** A row of the `meta` table: a key of its own (see keys.ts and replication/keys.ts's `syncNames`) and any JSON. Not validated as a whole: each reader checks the value it reads. */
export interface MetaRow {
  key: string;
  value: JsonValue;
}

const rowSchemas = {
  sessions: SessionRowSchema,
  messages: MessageRowSchema,
  journal: JournalRowSchema,
  notes: NoteRowSchema,
  memory: MemoryRowSchema,
  checkpoints: CheckpointRowSchema,
  outbox: z.union([OutboxOpRowSchema, OutboxBoardRowSchema]),
  runs: RunRowSchema,
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

/** The session's life on this replica (see SessionRow's `life`). */
export function lifeOf(row: SessionRow): string {
  return row.life ?? row.createdOrder;
}
