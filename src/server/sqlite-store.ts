/**
 * `sqliteStore(path)`: the embedded default store, one SQLite file through
 * better-sqlite3. WAL with synchronous=FULL, so a push that resolved is on
 * disk and survives a crash or power loss; each push is one IMMEDIATE write
 * transaction. Pokes stay in this process: serve one SQLite file from one
 * server process (use `postgresStore` for several).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { TabulaError } from '../core/errors.js';
import { createBoardCompactor, encodeBase64 } from './board.js';
import { loadDriver } from './driver.js';
import { PokeListeners } from './listeners.js';
import { POKE_MAX_ITEMS, pokeItems, type ServerStore, type StoreOptions, type StorePokeItems, type StorePullPage, type StorePulledItem, type StorePushItem, type StorePushResult } from './store.js';

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
`;

/** A board update's session life (`after`), added to databases created before lives were named. */
const LIFE_COLUMN = 'ALTER TABLE tabula_items ADD COLUMN life_after TEXT';

/**
 * A page of a user's log, each item already in its wire JSON (a `PullItem`):
 * the op text as stored, the board bytes in base64. SQLite builds the text
 * (json_quote escapes the ids), so the page reaches JavaScript as one string
 * per item, not an object of five columns to be serialised again.
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
  const deleteOlderLives = db.prepare<{ user: string; session: string }>(
    'DELETE FROM tabula_items WHERE user_id = @user AND session_id = @session AND board IS NOT NULL AND life_after < ' +
      '(SELECT max(life_after) FROM tabula_items WHERE user_id = @user AND session_id = @session AND board IS NOT NULL)',
  );
  const page = db.prepare<[string, number, number], [number, string]>(PAGE).raw();

  /**
   * Drops the session's board updates of lives older than the newest one stored (a delete ended them:
   * every client drops them too, whichever was pushed first), then, once life `after` holds more than
   * `compactAfter`, merges its oldest rows within the compactor's budget (see createBoardCompactor).
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
    const before = head;
    // The (session, life) pairs this push added board updates to.
    const boards = new Map<string, [string, string | null]>();
    for (const item of fresh) {
      head++;
      if ('op' in item) {
        insert.run(userId, head, clientId, item.op.sessionId, JSON.stringify(item.op), null, null);
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
    const rows = page.all(userId, before, fresh.length);
    const appended = pokeItems(
      before,
      rows.map(([position, json]) => ({ position, json })),
    );
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
    pull: (userId, after, limit) =>
      settle((): StorePullPage => {
        assertOpen();
        const rows = page.all(userId, after, limit + 1);
        const items: StorePulledItem[] = [];
        for (let i = 0; i < rows.length && i < limit; i++) items.push({ position: rows[i]![0], json: rows[i]![1] });
        return { items, more: rows.length > limit };
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
