/**
 * The IndexedDB schema (Dexie): the stores of the current version, the
 * versions whose upgrades must run, and the few queries every module makes
 * the same way (a session's range, a user's sessions, a user's outbox).
 *
 * Versions: `STORES` is the current version's full schema. A change that
 * only adds or drops indexes or tables edits it and bumps `SCHEMA_VERSION`;
 * a change that rewrites rows adds a version with an upgrade function,
 * which is then kept forever (see STORES).
 *
 * The shapes of the rows, and their validation, are rows.ts.
 */
import { Dexie, type Collection, type EntityTable, type Table } from 'dexie';
import type { Op } from '../../core/ops.js';
import { BOARD_QUEUED_PREFIX, LEGACY_SYNC_KEYS, syncNames } from '../replication/keys.js';
import type { CheckpointRow, JournalRow, MemoryRow, MessageRow, MetaRow, NoteRow, OutboxRow, RunRow, SessionRow } from './rows.js';

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
 * (see MessageRow's `streaming`), which costs a write nothing for a finished message (the status index
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

/** Every session row of a user, as a range of the sessions table's primary key. */
export function userSessionRows(db: TabulaDb, userId: string): Promise<SessionRow[]> {
  return db.sessions.where('[userId+sessionId]').between([userId, Dexie.minKey], [userId, Dexie.maxKey]).toArray();
}

/** Bounds of a compound index range over one session: [userId, sessionId, *]. */
export function sessionRange(userId: string, sessionId: string): [unknown[], unknown[]] {
  return [
    [userId, sessionId, Dexie.minKey],
    [userId, sessionId, Dexie.maxKey],
  ];
}
