/**
 * Ops: the unit of change. Every write to a session, local or arriving from
 * sync, is a list of ops applied by one function in the store, so there is
 * one write path and sync retries are safe: applying an op twice changes
 * nothing (message rows are keyed by id, last-write-wins fields compare
 * order keys, state saves compare version numbers).
 *
 * This module owns the op shapes and their zod schemas, shared by the
 * browser store, the sync client and the server. It does not apply ops.
 */
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from './errors.js';
import { ORDER_KEY } from './hlc.js';
import { ID_MAX_LENGTH, KEY_MAX_LENGTH, findNameProblem, nameSchema } from './names.js';
import { JsonValueSchema, findKeyProblem, type JsonValue } from './json.js';
import { MessageSchema } from './message.js';
import { safeParse } from './validation.js';

/** A stored row's order key (an op's order, or one with a `#index` suffix). */
export const OrderKeySchema = z.string().check(z.regex(ORDER_KEY, 'expected an order key'));
const IdSchema = z.string().check(z.minLength(1), z.maxLength(128));
/** An op's own order key: an HLC key without a `#index` suffix. */
const HlcKeySchema = z.string().check(
  z.regex(ORDER_KEY, 'expected an order key'),
  z.refine((key) => !key.includes('#'), 'expected an order key without a #index suffix'),
);
/** The order key of the save or restore a state was built on ('' for the state of a session never saved). */
const BaseSchema = z.union([z.literal(''), OrderKeySchema]);
/** At most this many clocks are named in a session.delete's `seen`: a delete stays small however many tabs wrote to the session. */
export const SEEN_MAX = 256;
/**
 * At most this many characters of base64 in a session.delete's `board` (about 3 KB of state vector, a few
 * hundred Yjs clients): a board written by more clients is said in part (see `board` below).
 */
export const BOARD_SEEN_MAX = 4096;

/**
 * The session context of a state patch: a JSON object. Not `z.record`: zod builds a record's output
 * without a `__proto__` key and reports nothing, so the server would acknowledge such a context and
 * store it without that key. JsonValueSchema refuses `__proto__` (as the local API does) and passes
 * the object through as it is.
 */
const ContextSchema = JsonValueSchema.check(
  z.refine((value) => typeof value === 'object' && value !== null && !Array.isArray(value), 'expected an object of key → JSON value'),
) as unknown as z.ZodMiniType<Record<string, JsonValue>>;

/** A memory scope or key: the names `memory.set()` accepts (1–128 characters of valid Unicode), keys not `__proto__` (`findKeyProblem`). */
const MemoryScopeSchema = nameSchema(KEY_MAX_LENGTH);
const MemoryKeySchema = z.string().check(
  z.superRefine((key, ctx) => {
    const problem = findNameProblem(key, KEY_MAX_LENGTH) ?? findKeyProblem(key);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
);

/** The persisted form of a PrefixContext. */
export const PrefixDataSchema = z.strictObject({
  systemPrompt: z.string(),
  grounding: z.array(MessageSchema),
  schemaBlock: z.nullable(z.string()),
});
/** A PrefixContext as stored: its system prompt, grounding messages and schema block. */
export type PrefixData = z.infer<typeof PrefixDataSchema>;

/** A message's storage status. */
export const MessageStatusSchema = z.enum(['complete', 'streaming', 'interrupted']);
/**
 * `'complete'`, `'streaming'` (a stream is still writing it) or `'interrupted'` (its stream ended without finishing).
 * @useDeclaredType
 */
export type MessageStatus = z.infer<typeof MessageStatusSchema>;

/** The state fields of a session that `save()` writes. */
export const StateFieldsSchema = z.strictObject({
  summary: z.nullable(z.string()),
  tasks: JsonValueSchema,
  plan: JsonValueSchema,
  permissions: JsonValueSchema,
  tools: z.array(z.string()),
  context: ContextSchema,
});
/** The state fields of a session: everything `save()` writes. */
export interface StateFields {
  /** Compacted summary of older messages. */
  summary: string | null;
  /** Todo list, objective… (app-defined JSON). */
  tasks: JsonValue;
  /** Plan-mode state. */
  plan: JsonValue;
  /** Tool permission rules. */
  permissions: JsonValue;
  /** Active tool groups. */
  tools: string[];
  /** Business context, written by runs (validated by the session's contextSchema). */
  context: Record<string, JsonValue>;
}
/** A partial update of the state fields. */
export const StatePatchSchema = z.partial(StateFieldsSchema);
/** A partial update of the state fields: the fields it names replace the stored ones. */
export type StatePatch = Partial<StateFields>;

/** The values of a new session's state fields. */
export function emptyStateFields(): StateFields {
  return { summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} };
}

/** What a checkpoint freezes: enough to put the session back as it was. */
export const CheckpointSnapshotSchema = z.strictObject({
  /** The prefix as it was. */
  prefix: PrefixDataSchema,
  /** The state fields as they were. */
  state: StateFieldsSchema,
  /** Every message, in order, with its id, order key, creation time (ms since the epoch) and status. */
  messages: z.array(
    z.strictObject({ id: IdSchema, order: OrderKeySchema, createdAt: z.number(), status: MessageStatusSchema, message: MessageSchema }),
  ),
});
/**
 * What a checkpoint freezes: the prefix, the state fields and the messages with their ids, order keys and status.
 * @useDeclaredType
 */
export type CheckpointSnapshot = z.infer<typeof CheckpointSnapshotSchema>;
/** A message as a checkpoint holds it (one of its snapshot's `messages`): its id, order key, creation time and status with it. */
export const CheckpointMessageSchema = CheckpointSnapshotSchema.shape.messages.def.element;
/** A message as a checkpoint holds it: its id, order key, creation time (ms since the epoch) and status with it. */
export type CheckpointMessage = z.infer<typeof CheckpointMessageSchema>;

const bodies = {
  'session.create': z.strictObject({ createdAt: z.number(), forkOf: z.nullable(z.strictObject({ sessionId: z.string(), userId: z.string() })) }),
  // `seen` names what the deleting replica had of the life it ended: for each clock that wrote to it, the
  // greatest order key of that clock applied there (the SEEN_MAX most recent clocks; an op of a clock not
  // named counts as unseen). A replica applying the delete names the work it drops that the deleter never
  // saw (see `DroppedWork` in store/apply/lives.ts). Older deletes have none.
  // `board` does the same for the life's blackboard, whose changes are not ops: base64 of the Yjs state
  // vector of the deleting replica's board of that life (of an empty doc when it had none), at most
  // BOARD_SEEN_MAX characters (a larger one keeps the clients that wrote most; a client left out counts as
  // unseen). Deletes made before it existed have none, and their boards are not compared.
  'session.delete': z.strictObject({
    seen: z.optional(z.array(HlcKeySchema).check(z.maxLength(SEEN_MAX))),
    board: z.optional(z.string().check(z.maxLength(BOARD_SEEN_MAX), z.regex(/^[A-Za-z0-9+/]*={0,2}$/, 'expected base64'))),
  }),
  'session.clear': z.strictObject({}),
  // `order`: where the message sorts, when not at the op's own order key. An import or fork keeps the
  // order keys of the session it copies, so two copies of one history agree on every replica.
  'message.append': z.strictObject({
    id: IdSchema,
    createdAt: z.number(),
    status: MessageStatusSchema,
    message: MessageSchema,
    order: z.optional(OrderKeySchema),
  }),
  // `order` and `createdAt` repeat the message's append, so an update that reaches a replica before
  // its append still stores the message (older ops without them are applied only after the append).
  'message.update': z.strictObject({
    id: IdSchema,
    status: MessageStatusSchema,
    message: MessageSchema,
    order: z.optional(OrderKeySchema),
    createdAt: z.optional(z.number()),
  }),
  'prefix.set': z.strictObject({ prefix: PrefixDataSchema }),
  // `base` is the order key of the save or restore the saving replica's state came from (its
  // `versionOrder`): a save that replaces another it was not built on is reported as a conflict. Older
  // saves have none (they are reported only when they replace a save of the same version).
  'state.save': z.strictObject({ version: z.number().check(z.int(), z.positive()), patch: StatePatchSchema, base: z.optional(BaseSchema) }),
  // `id` and `order`, when given, key and place the entries (`<id>:<index>` at `subOrder(order, index)`)
  // instead of the op's id and order: an import derives them from what it copies, so two imports of one
  // history store its entries once.
  'journal.append': z.strictObject({
    entries: z.array(JsonValueSchema).check(z.minLength(1)),
    id: z.optional(IdSchema),
    order: z.optional(HlcKeySchema),
  }),
  // `through` names the order key of the last entry the commit covers, so every replica commits the
  // same entries whatever arrives when; commits without it (older data) count entries instead.
  'journal.commit': z.strictObject({ watermark: z.number().check(z.int(), z.nonnegative()), through: z.optional(z.string().check(z.maxLength(128))) }),
  // `id` and `order`, when given, are the note's id and order key instead of the op's (an import's, derived
  // from the note it copies: two imports of one history store the note once).
  'note.add': z.strictObject({
    text: z.string().check(z.maxLength(500)),
    runId: z.nullable(z.string()),
    scope: z.nullable(z.string()),
    at: z.number(),
    id: z.optional(IdSchema),
    order: z.optional(OrderKeySchema),
  }),
  'memory.set': z.strictObject({ scope: MemoryScopeSchema, key: MemoryKeySchema, value: JsonValueSchema }),
  'memory.delete': z.strictObject({ scope: MemoryScopeSchema, key: MemoryKeySchema }),
  // A checkpoint larger than one op may be (the sync server's body limit) is written as its head, this op,
  // whose snapshot holds the first messages and whose `count` is the number of messages the checkpoint
  // holds, followed by checkpoint.part ops with the rest. Without `count`, the snapshot holds them all.
  'checkpoint.create': z.strictObject({
    id: IdSchema,
    label: z.nullable(z.string()),
    at: z.number(),
    snapshot: CheckpointSnapshotSchema,
    count: z.optional(z.number().check(z.int(), z.nonnegative())),
  }),
  // Messages `from`, `from + 1`… of the checkpoint `id` (positions in the whole snapshot's messages: the
  // head's come first, at 0). A part is placed by position, not by a part number, so any split of one
  // checkpoint (another device's re-upload of it, say) assembles to the same snapshot.
  'checkpoint.part': z.strictObject({
    id: IdSchema,
    from: z.number().check(z.int(), z.nonnegative()),
    messages: z.array(CheckpointMessageSchema).check(z.minLength(1)),
  }),
  // `base`: as a state.save's.
  'checkpoint.restore': z.strictObject({ id: IdSchema, version: z.number().check(z.int(), z.positive()), base: z.optional(BaseSchema) }),
  // Removes one message for good: a tombstone keeps a replayed or late append of that id from bringing it back.
  'message.remove': z.strictObject({ id: IdSchema }),
} as const;

type Bodies = typeof bodies;
/**
 * Every kind of op: `session.create`, `session.delete`, `session.clear`, `message.append`,
 * `message.update`, `message.remove`, `prefix.set`, `state.save`, `journal.append`, `journal.commit`,
 * `note.add`, `memory.set`, `memory.delete`, `checkpoint.create`, `checkpoint.part`, `checkpoint.restore`.
 */
export type OpKind = keyof Bodies;
/** The body of an op of kind K. */
export type OpBody<K extends OpKind> = z.infer<Bodies[K]>;

/**
 * One change to one session. `after` names the session life the op was written in: the order key of the
 * `session.delete` that life began after ('' for a first life). Replicas drop ops of a life that a later
 * delete ended, whatever order they arrive in. Ops written before lives were named have none (see
 * `applyOp` for the rules they keep).
 */
export type Op = {
  [K in OpKind]: { id: string; kind: K; userId: string; sessionId: string; order: string; after?: string; body: OpBody<K> };
}[OpKind];

/** A session life's `after` (see {@link Op}): '' (a first life) or the order key of a session.delete. */
export const LifeAfterSchema = z.union([z.literal(''), OrderKeySchema]);

const opVariants = (Object.keys(bodies) as OpKind[]).map((kind) =>
  z.strictObject({
    id: IdSchema,
    kind: z.literal(kind),
    userId: nameSchema(ID_MAX_LENGTH),
    sessionId: nameSchema(ID_MAX_LENGTH),
    order: OrderKeySchema,
    after: z.optional(LifeAfterSchema),
    body: bodies[kind],
  }),
);

/** The zod schema of an {@link Op}. */
export const OpSchema = z
  .discriminatedUnion('kind', opVariants as [(typeof opVariants)[number], ...typeof opVariants])
  // A life's ops are written after the delete it began after: an op that claims otherwise would end lives it never saw.
  .check(
    z.refine((op) => op.after === undefined || op.after < op.order, {
      path: ['after'],
      message: 'expected the order key of a delete ordered before the op (or \'\' for a first life)',
    }),
  ) as unknown as z.ZodMiniType<Op>;

/** Validates an op from elsewhere (a tab, the server); throws `schema/invalid` naming the field. */
export function parseOp(value: unknown, where = 'op'): Op {
  const result = safeParse(OpSchema, value);
  if (!result.success) {
    throw new TabulaError('schema/invalid', `${where} is not a valid op: ${describeIssues(result.error.issues)}.`, {
      issues: result.error.issues,
    });
  }
  return result.data;
}

/** Builds an op of kind K; the body is trusted (validated by the caller). */
export function makeOp<K extends OpKind>(kind: K, fields: { id: string; userId: string; sessionId: string; order: string; after?: string; body: OpBody<K> }): Op {
  return { ...fields, kind } as Op;
}
