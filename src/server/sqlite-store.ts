/**
 * `sqliteStore(path)`: the embedded default store, one SQLite file through
 * better-sqlite3. WAL with synchronous=FULL, so a push that resolved is on
 * disk and survives a crash or power loss; each push is one IMMEDIATE write
 * transaction. Pokes stay in this process: serve one SQLite file from one
 * server process (use `postgresStore` for several).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { TabulaError } from '../core/errors.js';
import { createBoardCompactor, encodeBase64 } from './board.js';
import { loadDriver } from './driver.js';
import { PokeListeners } from './listeners.js';
import { POKE_ITEMS_MAX_BYTES, POKE_MAX_ITEMS, livesBegunBy, livesOfStoredOps, pageBudget, pokeItems, type ServerStore, type StoreOptions, type StorePokeItems, type StorePullPage, type StorePushItem, type StorePushResult } from './store.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tabula_heads (user_id TEXT PRIMARY KEY, head INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tabula_clients (
  user_id TEXT NOT NULL, client_id TEXT NOT NULL, last_seq INTEGER NOT NULL,
  PRIMARY KEY (user_id, client_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tabula_items (
  user_id TEXT NOT NULL, position INTEGER NOT NULL, client_id TEXT, session_id TEXT NOT NULL,
  op TEXT, board BLOB, life_after TEXT,
  PRIMARY KEY (user_id, position)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tabula_items_board ON tabula_items (user_id, session_id, position) WHERE board IS NOT NULL;
CREATE TABLE IF NOT EXISTS tabula_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
`;

/** A board update's session life (`after`), added to databases created before lives were named. */
const LIFE_COLUMN = 'ALTER TABLE tabula_items ADD COLUMN life_after TEXT';

/**
 * The session lives stored ops began (guarantee 9, {@link livesBegunBy}): what a board update may name,
 * and what "the newest life" is when older lives' updates are dropped. TEXT compares with BINARY
 * collation, byte order of UTF-8: code-unit order for the ASCII order keys, as clients compare them.
 */
const LIVES = `
CREATE TABLE tabula_lives (
  user_id TEXT NOT NULL, session_id TEXT NOT NULL, after TEXT NOT NULL,
  PRIMARY KEY (user_id, session_id, after)) WITHOUT ROWID;
`;

/** Ops stored before tabula_lives existed that may begin a life (see livesOfStoredOps), a page at a time. */
const LIFE_CANDIDATES = `SELECT user_id, position, session_id, op FROM tabula_items
WHERE op IS NOT NULL AND (instr(op, '"kind":"session.delete"') > 0 OR instr(op, '"after":"') > 0) AND (user_id, position) > (?, ?)
ORDER BY user_id, position LIMIT 500`;

/**
 * A page's candidates, up to `limit + 1` items after a position (one more than
 * the page holds, so that their count says `more`): how many there are, and
 * whether an upper bound of all their JSON lengths fits in the budget (1; 0
 * when it does not, NULL when there are none), from column lengths only. An
 * id's JSON is at most 6 bytes a byte plus its quotes (json_quote writes a
 * control character as \u00XX; `null` is 4), so with SIZES' frames an op
 * takes at most its text, 6 bytes a byte of its client id and 23; a board 6
 * bytes a byte of its three ids, its base64 (4 bytes per 3, rounded up) and
 * 72. Pages of ops and small boards are far under the budget and `pull` reads
 * them with no other step; otherwise SIZES decides.
 *
 * No content is read, not even a 1 MiB board's overflow pages: octet_length
 * and length of a column need only the record header. Hence a range with no
 * end. The table is WITHOUT ROWID, and SQLite checks a range's end
 * (`user_id = ?`) by comparing each row's whole record with the key, overflow
 * pages and all: that scan read every candidate whole (300 boards of 1 MiB:
 * 100 ms against 3 ms). This one starts at (user, after) and stops after a
 * number of rows, the candidates or the user's head minus `after` if fewer
 * (positions are unique; head and items are written in one transaction); rows
 * past the user's own, when compaction left holes, are other users' and are
 * counted out by user_id.
 *
 * One aggregate inside SQLite, not a row per candidate into JavaScript:
 * measured on pages of 1,000 small ops, a pull costs 0.95 ms of CPU this way,
 * 1.2 ms with SIZES alone, 0.7 ms for the page without a budget.
 */
const BOUND = `
SELECT count(*), sum(bound) <= @budget FROM (
  SELECT user_id, coalesce(
    octet_length(op) + 6 * coalesce(octet_length(client_id), 0) + 23,
    (length(board) + 2) / 3 * 4 + 6 * (octet_length(session_id) + coalesce(octet_length(client_id), 0) + coalesce(octet_length(life_after), 0)) + 72
  ) AS bound
  FROM tabula_items WHERE (user_id, position) > (@user, @after) ORDER BY user_id, position
  LIMIT max(0, min(@candidates, coalesce((SELECT head FROM tabula_heads WHERE user_id = @user) - @after, @candidates)))
) WHERE user_id = @user`;

/**
 * Each of the first `?` items' length in wire JSON, exactly, from column
 * lengths and the ids' JSON, in position order: when BOUND does not fit,
 * `pull` iterates it and stops at the item that passes the byte budget
 * (guarantee 8). `?` is BOUND's count, in the same transaction: all of them
 * the user's. Only a board's life (stored after its bytes) makes SQLite read
 * that row whole.
 */
const SIZES = `
SELECT CASE
  WHEN op IS NOT NULL THEN 19 + octet_length(json_quote(client_id)) + octet_length(op)
  ELSE 48 + octet_length(json_quote(client_id)) + octet_length(json_quote(session_id)) + (length(board) + 2) / 3 * 4
    + CASE WHEN life_after IS NULL THEN 0 ELSE 9 + octet_length(json_quote(life_after)) END
END
FROM tabula_items WHERE (user_id, position) > (?, ?) ORDER BY user_id, position LIMIT ?`;

/**
 * The first items after a position, each already in its wire JSON (a
 * `PullItem`): the op text as stored, the board bytes in base64. SQLite
 * builds the text (json_quote escapes the ids), so the page reaches
 * JavaScript as one string per item, not an object of five columns to be
 * serialised again.
 */
const PAGE = `
SELECT position, CASE
  WHEN op IS NOT NULL THEN '{"clientId":' || json_quote(client_id) || ',"op":' || op || '}'
  ELSE '{"clientId":' || json_quote(client_id) || ',"board":{"sessionId":' || json_quote(session_id) || ',"update":"' || tabula_base64(user_id, position, board) || '"'
    || CASE WHEN life_after IS NULL THEN '' ELSE ',"after":' || json_quote(life_after) END || '}}'
END
FROM tabula_items WHERE user_id = ? AND position > ? ORDER BY position LIMIT ?`;

/**
 * Opens (creating if needed) the SQLite database at `path` as a
 * {@link ServerStore}. Throws `server/driver-missing` when better-sqlite3 is
 * not installed.
 */
export function sqliteStore(path: string, options: StoreOptions = {}): ServerStore {
  const Database = loadDriver<typeof BetterSqlite3>('better-sqlite3', 'sqliteStore');
  const compactAfter = options.compactBoardAfter ?? 100;
  const compactor = createBoardCompactor(options.compactBudgetBytes ?? 1024 * 1024);
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('busy_timeout = 5000');
  db.exec(SCHEMA);
  if (!db.prepare<[], { name: string }>('SELECT name FROM pragma_table_info(\'tabula_items\')').all().some((column) => column.name === 'life_after')) db.exec(LIFE_COLUMN);
  // The storage's epoch (guarantee 10): drawn once, by whichever process creates the file's first row of it.
  db.prepare('INSERT OR IGNORE INTO tabula_meta (key, value) VALUES (\'epoch\', ?)').run(randomUUID());
  const epoch = db.prepare<[], { value: string }>('SELECT value FROM tabula_meta WHERE key = \'epoch\'').get()!.value;
  // Created and filled in one write transaction: a second process opening the file waits, then finds it.
  db.transaction(() => {
    if (db.prepare('SELECT 1 FROM sqlite_master WHERE type = \'table\' AND name = \'tabula_lives\'').get() !== undefined) return;
    db.exec(LIVES);
    const candidates = db.prepare<[string, number], { user_id: string; position: number; session_id: string; op: string }>(LIFE_CANDIDATES);
    const record = db.prepare<[string, string, string]>('INSERT OR IGNORE INTO tabula_lives (user_id, session_id, after) VALUES (?, ?, ?)');
    for (let from: [string, number] = ['', 0]; ; ) {
      const rows = candidates.all(...from);
      if (rows.length === 0) break;
      for (const life of livesOfStoredOps(rows.map((row) => ({ userId: row.user_id, sessionId: row.session_id, op: row.op })))) record.run(...life);
      from = [rows.at(-1)!.user_id, rows.at(-1)!.position];
    }
  }).immediate();
  // Base64 for PAGE; SQLite calls it only for board rows.
  db.function('tabula_base64', { deterministic: true }, (userId, position, board) => {
    if (!Buffer.isBuffer(board)) throw new TabulaError('storage/failed', `Item ${String(position)} of user ${String(userId)} holds neither an op nor a board update.`);
    return encodeBase64(board);
  });

  const listeners = new PokeListeners();
  const getHead = db.prepare<[string], { head: number }>('SELECT head FROM tabula_heads WHERE user_id = ?');
  const setHead = db.prepare('INSERT INTO tabula_heads (user_id, head) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET head = excluded.head');
  const getSeq = db.prepare<[string, string], { last_seq: number }>('SELECT last_seq FROM tabula_clients WHERE user_id = ? AND client_id = ?');
  const setSeq = db.prepare(
    'INSERT INTO tabula_clients (user_id, client_id, last_seq) VALUES (?, ?, ?) ON CONFLICT (user_id, client_id) DO UPDATE SET last_seq = excluded.last_seq',
  );
  const insert = db.prepare<[string, number, string | null, string, string | null, Uint8Array | null, string | null]>(
    'INSERT INTO tabula_items (user_id, position, client_id, session_id, op, board, life_after) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  // `IS` matches NULL too: the updates of a board from before lives were named are one life of their own.
  const countBoard = db.prepare<[string, string, string | null], { n: number }>(
    'SELECT count(*) AS n FROM tabula_items WHERE user_id = ? AND session_id = ? AND board IS NOT NULL AND life_after IS ?',
  );
  const boardSizes = db.prepare<[string, string, string | null], { position: number; size: number }>(
    'SELECT position, length(board) AS size FROM tabula_items WHERE user_id = ? AND session_id = ? AND board IS NOT NULL AND life_after IS ? ORDER BY position',
  );
  // A compaction's rows are consecutive in their life: every row of the life between two positions.
  const boardRows = db.prepare<[string, string, string | null, number, number], { position: number; board: Buffer }>(
    'SELECT position, board FROM tabula_items WHERE user_id = ? AND session_id = ? AND board IS NOT NULL AND life_after IS ? AND position BETWEEN ? AND ? ORDER BY position',
  );
  const deleteBoard = db.prepare<[string, string, string | null, number, number]>(
    'DELETE FROM tabula_items WHERE user_id = ? AND session_id = ? AND board IS NOT NULL AND life_after IS ? AND position BETWEEN ? AND ?',
  );
  // The newest life a stored op began, never a board row's claim: a board naming a life is refused unless one did.
  const deleteOlderLives = db.prepare<{ user: string; session: string }>(
    'DELETE FROM tabula_items WHERE user_id = @user AND session_id = @session AND board IS NOT NULL AND life_after < ' +
      '(SELECT max(after) FROM tabula_lives WHERE user_id = @user AND session_id = @session)',
  );
  const hasLife = db.prepare<[string, string, string]>('SELECT 1 FROM tabula_lives WHERE user_id = ? AND session_id = ? AND after = ?').pluck();
  const addLife = db.prepare<[string, string, string]>('INSERT OR IGNORE INTO tabula_lives (user_id, session_id, after) VALUES (?, ?, ?)');
  const bound = db.prepare<[{ budget: number; user: string; after: number; candidates: number }], [number, 0 | 1 | null]>(BOUND).raw();
  const sizes = db.prepare<[string, number, number], number>(SIZES).pluck();
  const pageStatement = db.prepare<[string, number, number], [number, string]>(PAGE).raw();

  /**
   * Up to `limit` items after `after` within `maxBytes` of JSON, and whether more follow: BOUND
   * counts the candidates and, when their bound does not fit, SIZES finds where the page ends; PAGE
   * reads it. One read transaction, so every statement sees the same rows.
   */
  const page = db.transaction((userId: string, after: number, limit: number, maxBytes: number): StorePullPage => {
    const budget = pageBudget(maxBytes);
    const [candidates, fits] = bound.get({ budget, user: userId, after, candidates: limit + 1 })!;
    if (candidates === 0) return { items: [], more: false };
    let count = Math.min(candidates, limit);
    let more = candidates > limit;
    if (fits !== 1) {
      count = 0;
      more = false;
      let bytes = 0;
      for (const size of sizes.iterate(userId, after, candidates)) {
        bytes += size;
        if (count === limit || (count > 0 && bytes > budget)) {
          more = true;
          break;
        }
        count++;
      }
    }
    // A limit of 0 reads nothing, as postgresStore answers it.
    if (count === 0) return { items: [], more: false };
    return { items: pageStatement.all(userId, after, count).map(([position, json]) => ({ position, json })), more };
  });

  /**
   * Drops the session's board updates of lives older than the newest one a stored op began (its
   * delete ended them: every client drops them too, whichever was pushed first), then, once life
   * `after` holds more than `compactAfter`, merges its oldest rows within the compactor's budget (see
   * createBoardCompactor).
   */
  function compact(userId: string, sessionId: string, after: string | null): void {
    deleteOlderLives.run({ user: userId, session: sessionId });
    if (countBoard.get(userId, sessionId, after)!.n <= compactAfter) return;
    const window = compactor.window();
    for (const row of boardSizes.iterate(userId, sessionId, after)) if (!window.offer(row.position, row.size)) break;
    const positions = window.positions();
    if (positions.length === 0) return;
    const rows = boardRows.all(userId, sessionId, after, positions[0]!, positions[positions.length - 1]!);
    for (const run of compactor.merge(userId, sessionId, rows)) {
      const last = run.positions[run.positions.length - 1]!;
      deleteBoard.run(userId, sessionId, after, run.positions[0]!, last);
      insert.run(userId, last, null, sessionId, null, run.merged, after);
    }
  }

  /** The push's result, and its items as a poke carries them (read only when someone here listens). */
  type Applied = { result: StorePushResult; appended?: StorePokeItems };
  const apply = db.transaction((userId: string, clientId: string, items: readonly StorePushItem[]): Applied => {
    const lastSeq = getSeq.get(userId, clientId)?.last_seq ?? 0;
    const fresh = items.filter((item) => item.seq > lastSeq);
    let head = getHead.get(userId)?.head ?? 0;
    if (fresh.length === 0) return { result: { status: 'applied', lastSeq, appended: 0, head } };
    if (fresh.some((item, i) => item.seq !== lastSeq + 1 + i)) return { result: { status: 'gap', lastSeq } };
    // Guarantee 9, checked before anything is written: a life must be begun by a stored op or an earlier item.
    const begun = new Set<string>();
    for (const [index, item] of items.entries()) {
      if (item.seq <= lastSeq) continue;
      if ('op' in item) {
        for (const life of livesBegunBy(item.op)) begun.add(JSON.stringify([item.op.sessionId, life]));
      } else {
        const { sessionId, after } = item.board;
        if (after !== undefined && after !== '' && !begun.has(JSON.stringify([sessionId, after])) && hasLife.get(userId, sessionId, after) === undefined) {
          return { result: { status: 'unknown-life', index } };
        }
      }
    }
    const before = head;
    // The (session, life) pairs this push added board updates to.
    const boards = new Map<string, [string, string | null]>();
    for (const item of fresh) {
      head++;
      if ('op' in item) {
        insert.run(userId, head, clientId, item.op.sessionId, JSON.stringify(item.op), null, null);
        for (const life of livesBegunBy(item.op)) addLife.run(userId, item.op.sessionId, life);
      } else {
        const after = item.board.after ?? null;
        insert.run(userId, head, clientId, item.board.sessionId, null, item.board.update, after);
        boards.set(JSON.stringify([item.board.sessionId, after]), [item.board.sessionId, after]);
      }
    }
    for (const [sessionId, after] of boards.values()) compact(userId, sessionId, after);
    setHead.run(userId, head);
    const newSeq = fresh[fresh.length - 1]!.seq;
    setSeq.run(userId, clientId, newSeq);
    const result: StorePushResult = { status: 'applied', lastSeq: newSeq, appended: fresh.length, head };
    if (!listeners.has(userId) || fresh.length > POKE_MAX_ITEMS) return { result };
    // The pull's own query over the push's positions, after compaction: what a pull would get now.
    const pulled = page(userId, before, fresh.length, POKE_ITEMS_MAX_BYTES);
    const appended = pulled.more ? undefined : pokeItems(before, pulled.items);
    return appended ? { result, appended } : { result };
  });

  let closed = false;
  const assertOpen = (): void => {
    if (closed) throw new TabulaError('storage/closed', 'This sqliteStore is closed; create a new one.');
  };

  return {
    push: (userId, clientId, items) =>
      settle(() => {
        assertOpen();
        const { result, appended } = apply.immediate(userId, clientId, items);
        if (result.status === 'applied' && result.appended > 0) listeners.poke(userId, result.head, appended);
        return result;
      }),
    pull: (userId, after, limit, maxBytes) =>
      settle((): StorePullPage => {
        assertOpen();
        return page(userId, after, limit, maxBytes);
      }),
    head: (userId) =>
      settle(() => {
        assertOpen();
        return getHead.get(userId)?.head ?? 0;
      }),
    lastSeq: (userId, clientId) =>
      settle(() => {
        assertOpen();
        return getSeq.get(userId, clientId)?.last_seq ?? 0;
      }),
    epoch: () =>
      settle(() => {
        assertOpen();
        return epoch;
      }),
    subscribe: (userId, onPoke) =>
      settle(() => {
        assertOpen();
        return listeners.add(userId, onPoke);
      }),
    close: () =>
      settle(() => {
        if (closed) return;
        closed = true;
        listeners.clear();
        db.close();
      }),
  };
}

/** Runs synchronous driver work behind the store's async contract: a throw becomes a rejection. */
function settle<T>(work: () => T): Promise<T> {
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}
