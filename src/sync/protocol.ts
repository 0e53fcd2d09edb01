/**
 * The sync wire protocol: the zod schemas and types of every request,
 * response and event between a Tabula client and a sync server, plus the
 * paths and default limits. Both ends import this one module, so a change to
 * the protocol is a change here first.
 *
 * Pure: it imports only the core and zod (no Node, no DOM), so the browser
 * client can bundle it. It does not decode Yjs updates or base64 (each end
 * does that with what its platform has) and it does not talk to the network.
 *
 * ```
 * POST /v1/push  {clientId, items: [{seq, op} | {seq, board: {sessionId, update, after?}}]} → {lastSeq}
 * POST /v1/pull  {cursor, limit?} → {items: [{clientId, op} | {clientId, board}], cursor, more}
 * GET  /v1/events  text/event-stream of `poke` events ({cursor, after?, items?, time?}) and `:` heartbeat
 *                  comments, ended by an `expired` event ({reason}) when the token stops being accepted
 * GET  /v1/health  {ok: true, protocol}
 * errors         {error: {code, message, lastSeq?, head?}}
 * every answer   X-Tabula-Time: <the server's clock, ms>, X-Tabula-Epoch: <the store's id>
 * ```
 */
import * as z from 'zod/mini';
import { DEFAULT_BOARD_UPDATE_LIMITS } from '../core/board-update/index.js';
import { TabulaError, describeIssues, type ErrorCode } from '../core/errors.js';
import { DEFAULT_MAX_DRIFT_MS, hlcOf, parseHlc } from '../core/hlc.js';
import { LifeAfterSchema, OpSchema, type Op } from '../core/ops.js';
import { ID_MAX_LENGTH, nameSchema } from '../core/names.js';
import { safeParse } from '../core/validation.js';

/** The protocol revision this module describes; the server reports it on `/v1/health`. */
export const PROTOCOL_VERSION = 1;

/** The server's endpoints. */
export const SYNC_PATHS = {
  push: '/v1/push',
  pull: '/v1/pull',
  events: '/v1/events',
  health: '/v1/health',
} as const;

/**
 * The headers every server answer carries, errors and event streams included. A client corrects its
 * clock with the first and notices a server that lost its data by the second.
 */
export const SYNC_HEADERS = {
  /** The server's clock when it answered, in ms since the epoch (decimal). */
  time: 'X-Tabula-Time',
  /**
   * The server's store's id: random when the store was created, kept with its data. A new one means
   * the data behind this URL is not what it was (restored from an empty volume, a new deployment).
   */
  epoch: 'X-Tabula-Epoch',
} as const;

/** The shape of an epoch: 1–64 characters of `A–Z a–z 0–9 _ -`. */
export const EPOCH = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Bytes a push body holds besides its one item's op: `{"clientId":…,"items":[{"seq":…,"op":…}]}` is
 * under 120 bytes; the rest is room (a proxy's headers count elsewhere).
 */
export const PUSH_ENVELOPE_BYTES = 4096;

/** The largest op (its JSON, in UTF-8 bytes) a server with `limits` takes: one op alone in a push, under `maxBodyBytes`. */
export function maxOpBytes(limits: Pick<SyncLimits, 'maxBodyBytes'>): number {
  return limits.maxBodyBytes - PUSH_ENVELOPE_BYTES;
}

/** Limits a server enforces; a client keeps its pushes under them. */
export interface SyncLimits {
  /** Largest request body, in bytes; larger gets 413 `sync/too-large`. @default 1048576 (1 MiB) */
  readonly maxBodyBytes: number;
  /** Most items in one push; more gets 413 `sync/too-large`. @default 1000 */
  readonly maxPushItems: number;
  /** Largest decoded Yjs update in one board item, in bytes; larger gets 413. @default 524288 (512 KiB) */
  readonly maxUpdateBytes: number;
  /**
   * Most structs (items, GC and skip runs) plus delete-set ranges in one board item's update; more gets
   * 413. Bounds the work of storing, compacting and applying a push, which tiny structs (2 bytes each)
   * would make larger than its bytes suggest; a legitimate update at the byte limit holds about 53 000
   * (see `BoardUpdateLimits`). @default 131072
   */
  readonly maxUpdateStructs: number;
  /**
   * Most bytes of item JSON in one pull answer: a page stops before the item
   * that would pass it (a single larger item still goes alone), and says
   * `more`. Bounds the server's memory per pull whatever the items weigh.
   * @default 4194304 (4 MiB)
   */
  readonly maxPullBytes: number;
  /** Most items one pull returns, whatever `limit` asks for. @default 1000 */
  readonly maxPullItems: number;
  /**
   * Longest a push or pull may take to deliver its body, in ms, counted from when the server starts
   * reading it; a slower body gets 408 `sync/timeout` and nothing of it is stored. @default 60000 (60 s)
   */
  readonly bodyTimeoutMs: number;
  /**
   * Most bytes of events an event stream holds for a reader that does not keep up (a stalled
   * connection). Past it the server ends the stream instead of buffering more; the client reconnects
   * and pulls what it missed. @default 262144 (256 KiB)
   */
  readonly maxStreamQueueBytes: number;
  /**
   * Most event streams one user may hold open on one server instance (a profile's leading tab holds
   * one); more get 429 `sync/rate-limited` until one closes. @default 8
   */
  readonly maxStreamsPerUser: number;
  /**
   * How far ahead of the server's clock an op's wall time (the first 15 digits of its `order`) may
   * be, in ms; an op further ahead gets 400 `schema/invalid` naming `items[i].op.order`. A device
   * whose clock runs ahead would otherwise win every last-writer-wins write, and clear or restore
   * away what other devices write after it, for as long as it runs ahead. Clients correct their
   * clocks against the server's (`X-Tabula-Time`) and do not follow keys past the same bound.
   * @default 300000 (5 minutes)
   */
  readonly maxDriftMs: number;
}

/** The limits a server uses unless told otherwise. */
export const DEFAULT_SYNC_LIMITS: SyncLimits = Object.freeze({
  maxBodyBytes: 1024 * 1024,
  maxPushItems: 1000,
  maxUpdateBytes: DEFAULT_BOARD_UPDATE_LIMITS.maxBytes,
  maxUpdateStructs: DEFAULT_BOARD_UPDATE_LIMITS.maxStructs,
  maxPullBytes: 4 * 1024 * 1024,
  maxPullItems: 1000,
  bodyTimeoutMs: 60_000,
  maxStreamQueueBytes: 256 * 1024,
  maxStreamsPerUser: 8,
  maxDriftMs: DEFAULT_MAX_DRIFT_MS,
});

/**
 * The path of the first order key of `op` whose wall time is more than `maxDriftMs` past `nowMs`
 * (`order`, or `body.order` of a message update, which stores the message at it), or null.
 */
export function findDriftedOrder(op: Op, nowMs: number, maxDriftMs: number): 'order' | 'body.order' | null {
  const past = (order: string): boolean => parseHlc(hlcOf(order)).wallMs - nowMs > maxDriftMs;
  if (past(op.order)) return 'order';
  if (op.kind === 'message.update' && op.body.order !== undefined && past(op.body.order)) return 'body.order';
  return null;
}

/** A client's sequence number of a pushed item: 1, 2, 3… per (user, clientId). */
export const SeqSchema = z.number().check(z.int(), z.positive(), z.maximum(Number.MAX_SAFE_INTEGER));

/** Identifies one client (one browser profile) of a user; the same alphabet as an HLC node id. */
export const ClientIdSchema = z.string().check(z.regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected 1–64 characters of A–Z, a–z, 0–9, _ or -'));

/** Standard base64 with padding (RFC 4648 §4). */
export const Base64Schema = z.string().check(z.regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/, 'expected base64'));

/**
 * A position in a user's item log, as the server hands it out. Clients treat
 * it as opaque and send back the last one they got; `null` means the start.
 */
export const CursorSchema = z.string().check(z.regex(/^\d{1,15}$/, 'expected a cursor returned by the server'));

/** A blackboard (Yjs) update of one session life, base64-encoded. */
export const BoardUpdateSchema = z.strictObject({
  sessionId: nameSchema(ID_MAX_LENGTH),
  update: Base64Schema,
  after: z.optional(LifeAfterSchema),
});
/** A blackboard update of one session, as it travels. */
export interface BoardUpdate {
  /** The session whose blackboard it updates (1–256 characters). */
  readonly sessionId: string;
  /** A Yjs update (`Y.encodeStateAsUpdate` / an `update` event), base64. */
  readonly update: string;
  /**
   * The session life the board belongs to, as ops name it (`Op.after`): a client applies the update
   * only to that life, and the server compacts each life's updates apart. Absent from boards of
   * sessions created before lives were named.
   */
  readonly after?: string;
}

/** One pushed item: an op or a board update, numbered by the client. */
export type PushItem = { readonly seq: number; readonly op: Op } | { readonly seq: number; readonly board: BoardUpdate };

const PushItemSchema = z
  .strictObject({ seq: SeqSchema, op: z.optional(OpSchema), board: z.optional(BoardUpdateSchema) })
  .check(z.refine((item) => (item.op === undefined) !== (item.board === undefined), 'an item holds exactly one of `op` or `board`'));

/** `POST /v1/push` body. */
export interface PushRequest {
  /** The pushing client (one browser profile of the user), 1–64 characters of `A–Z a–z 0–9 _ -`; seqs count per client. */
  readonly clientId: string;
  /** Items with seq = lastSeq + 1, lastSeq + 2, … (seqs the server has are ignored). */
  readonly items: readonly PushItem[];
}
/** The zod schema of a {@link PushRequest}. */
export const PushRequestSchema = z.strictObject({
  clientId: ClientIdSchema,
  items: z.array(PushItemSchema).check(z.minLength(1)),
}) as unknown as z.ZodMiniType<PushRequest>;

/** `POST /v1/push` answer, sent after the push is committed. */
export interface PushResponse {
  /** The highest seq of this client the server has stored. */
  readonly lastSeq: number;
}
/** The zod schema of a {@link PushResponse}. */
export const PushResponseSchema: z.ZodMiniType<PushResponse> = z.strictObject({ lastSeq: z.number().check(z.int(), z.nonnegative()) });

/** `POST /v1/pull` body. */
export interface PullRequest {
  /** The cursor of the last pull, or `null` to read from the start. */
  readonly cursor: string | null;
  /** Most items wanted; the server may return fewer (its `maxPullItems`). */
  readonly limit?: number;
}
/** The zod schema of a {@link PullRequest}. */
export const PullRequestSchema: z.ZodMiniType<PullRequest> = z.strictObject({
  cursor: z.nullable(CursorSchema),
  limit: z.optional(z.number().check(z.int(), z.positive())),
});

/**
 * One pulled item with the client that pushed it. `clientId` is `null` for a
 * board update the server compacted from several pushes (it may hold other
 * clients' changes, so a client must not skip it as its own echo).
 */
export type PullItem = { readonly clientId: string | null; readonly op: Op } | { readonly clientId: string | null; readonly board: BoardUpdate };

const PullItemSchema = z
  .strictObject({ clientId: z.nullable(ClientIdSchema), op: z.optional(OpSchema), board: z.optional(BoardUpdateSchema) })
  .check(z.refine((item) => (item.op === undefined) !== (item.board === undefined), 'an item holds exactly one of `op` or `board`'));

/** `POST /v1/pull` answer. */
export interface PullResponse {
  /** The user's items after the cursor, in the server's commit order. */
  readonly items: readonly PullItem[];
  /** Where the next pull starts (the request's cursor when nothing was new). */
  readonly cursor: string | null;
  /** True when more items wait: pull again with `cursor` at once. */
  readonly more: boolean;
}
/** The zod schema of a {@link PullResponse}; a client validates what it receives with it. */
export const PullResponseSchema = z.strictObject({
  items: z.array(PullItemSchema),
  cursor: z.nullable(CursorSchema),
  more: z.boolean(),
}) as unknown as z.ZodMiniType<PullResponse>;

/**
 * The `data` of a `poke` event: the user's items now reach `cursor`. After a
 * small push the poke also carries what it appended: `items` are exactly
 * what a pull from `after` (null: from the start) returns up to `cursor`. A
 * client may apply them only when its cursor is exactly `after`; any other
 * client pulls.
 */
export interface PokeEvent {
  /** Where the user's item log now reaches: a pull from a client's cursor gets everything up to it. */
  readonly cursor: string;
  /** The cursor `items` continue (null: the start); present exactly when `items` is. */
  readonly after?: string | null;
  /** What the push appended, as a pull from `after` returns it up to `cursor`; at least one. */
  readonly items?: readonly PullItem[];
  /** The server's clock when it sent the poke, in ms since the epoch (as `X-Tabula-Time`). */
  readonly time?: number;
}
/** The zod schema of a {@link PokeEvent}; its items are checked as a pull's are. */
export const PokeEventSchema = z
  .strictObject({
    cursor: CursorSchema,
    after: z.optional(z.nullable(CursorSchema)),
    items: z.optional(z.array(PullItemSchema).check(z.minLength(1))),
    time: z.optional(z.number().check(z.int(), z.nonnegative())),
  })
  .check(z.refine((poke) => (poke.after === undefined) === (poke.items === undefined), 'a poke holds `after` and `items` together or neither')) as unknown as z.ZodMiniType<PokeEvent>;

/**
 * The `data` of an `expired` event, the last event of a stream whose token stopped being accepted: its
 * `exp` passed (`'expired'`) or the server's `isRevoked` check refused it (`'revoked'`). The server
 * ends the stream after it; a client gets a fresh token and reconnects.
 */
export interface ExpiredEvent {
  readonly reason: 'expired' | 'revoked';
}

/** The codes of {@link SyncErrorCode}, as a list (for `z.enum`). */
export const SYNC_ERROR_CODES = [
  'sync/unauthorized',
  'sync/forbidden',
  'sync/gap',
  'sync/too-large',
  'sync/not-found',
  'sync/rate-limited',
  'sync/timeout',
  'schema/invalid',
  'storage/failed',
] as const satisfies readonly ErrorCode[];
/**
 * A code a sync server answers with. `sync/rate-limited` (429, too many event streams) and
 * `sync/timeout` (408, a body too slow to arrive) mean: nothing was done, retry later.
 * @useDeclaredType
 */
export type SyncErrorCode = (typeof SYNC_ERROR_CODES)[number];

/**
 * Every error response: `{error: {code, message}}`. A `sync/gap` of a push also says the server's
 * `lastSeq` for the client; one of a pull (its cursor is past everything the server holds: the
 * server lost data) says the server's `head`.
 */
export interface ErrorResponse {
  /** The {@link SyncErrorCode}, a message saying what went wrong, and `lastSeq` or `head` for a `sync/gap`. */
  readonly error: { readonly code: SyncErrorCode; readonly message: string; readonly lastSeq?: number; readonly head?: number };
}
/** The zod schema of an {@link ErrorResponse}. */
export const ErrorResponseSchema: z.ZodMiniType<ErrorResponse> = z.object({
  error: z.object({
    code: z.enum(SYNC_ERROR_CODES),
    message: z.string(),
    lastSeq: z.optional(z.number().check(z.int(), z.nonnegative())),
    head: z.optional(z.number().check(z.int(), z.nonnegative())),
  }),
});

/** `GET /v1/health` answer. */
export interface HealthResponse {
  /** Always true: the server answers. */
  readonly ok: true;
  /** The server's {@link PROTOCOL_VERSION}. */
  readonly protocol: number;
}

/**
 * Validates a wire message with `schema`; throws `schema/invalid` naming
 * every bad field (`items[3].op.body.text: …`) so the sender can fix it.
 */
export function parseWire<T>(schema: z.ZodMiniType<T>, value: unknown, what: string): T {
  const result = safeParse(schema, value);
  if (!result.success) {
    throw new TabulaError('schema/invalid', `${what} is invalid: ${describeIssues(result.error.issues)}.`, { issues: result.error.issues });
  }
  return result.data;
}
