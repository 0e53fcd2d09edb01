/**
 * `postgresStore(url | pool)`: the store past one machine. Any number of
 * stateless server instances share one PostgreSQL; a push takes the user's
 * head row lock, so one user's pushes commit one at a time and positions
 * follow commit order on every instance. Pokes travel by `NOTIFY`, sent
 * right after the push commits, to every instance's `LISTEN` connection.
 *
 * A notification is only a hint: any role that can connect may send one on
 * the channel, so its payload carries no items (only the user and two
 * positions), is parsed defensively and, when it names a user with
 * subscribers here, makes this instance read that user's new items from the
 * tables itself. Those reads are chained per user and coalesced, so pokes
 * stay in order and a burst costs one read.
 *
 * The schema is created on first use, under an advisory lock so instances
 * starting together do not race. One connection is held for LISTEN; if it
 * drops, it is reopened and every subscribed user's log is read again (a
 * notification may have been lost in between).
 *
 * Order keys and session lives are compared with `COLLATE "C"`: they are
 * ASCII, compared by clients and SQLite in code-unit order, and a database
 * collation (ICU, en_US) orders them otherwise.
 */
import type * as Pg from 'pg';
import { randomUUID } from 'node:crypto';
import { TabulaError } from '../core/errors.js';
import { ID_MAX_LENGTH, findNameProblem } from '../core/names.js';
import { createBoardCompactor } from './board.js';
import { loadDriver } from './driver.js';
import { PokeListeners } from './listeners.js';
import { POKE_ITEMS_MAX_BYTES, POKE_MAX_ITEMS, livesBegunBy, livesOfStoredOps, pageBudget, pokeItems, type ServerStore, type StoreOptions, type StorePullPage, type StorePulledItem, type StorePushItem, type StorePushResult } from './store.js';

const CHANNEL = 'tabula_poke';
/**
 * Longest notification payload read, in UTF-16 code units; longer ones are ignored unparsed. Ours
 * are at most ~1,600 (a 256-unit user id escaped 6 units a unit, and two numbers), far under
 * PostgreSQL's 8,000-byte limit.
 */
const POKE_PAYLOAD_MAX_LENGTH = 2048;
/** At most one log line per this many ms about notifications that were ignored. */
const IGNORED_LOG_INTERVAL_MS = 60_000;
// Any constant: it only has to be the same for every instance.
const SCHEMA_LOCK = 7_341_207_011;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tabula_heads (user_id text PRIMARY KEY, head bigint NOT NULL);
CREATE TABLE IF NOT EXISTS tabula_clients (
  user_id text NOT NULL, client_id text NOT NULL, last_seq bigint NOT NULL,
  PRIMARY KEY (user_id, client_id));
CREATE TABLE IF NOT EXISTS tabula_items (
  user_id text NOT NULL, position bigint NOT NULL, client_id text, session_id text NOT NULL,
  op text, board bytea,
  PRIMARY KEY (user_id, position));
-- A board update's session life (its "after"); databases created before lives were named get the column here.
ALTER TABLE tabula_items ADD COLUMN IF NOT EXISTS life_after text;
CREATE INDEX IF NOT EXISTS tabula_items_board ON tabula_items (user_id, session_id, position) WHERE board IS NOT NULL;
-- The session lives stored ops began (guarantee 9, livesBegunBy): what a board update may name, and
-- what "the newest life" is when older lives' updates are dropped.
CREATE TABLE IF NOT EXISTS tabula_lives (
  user_id text NOT NULL, session_id text NOT NULL, after text COLLATE "C" NOT NULL,
  PRIMARY KEY (user_id, session_id, after));
-- The storage's epoch (guarantee 10), and whatever else the store keeps of itself.
CREATE TABLE IF NOT EXISTS tabula_meta (key text PRIMARY KEY, value text NOT NULL);
-- v2 stored ops without recording the lives they begin: an instance still calling it must fail, not
-- store a delete whose life boards could then not name.
DROP FUNCTION IF EXISTS tabula_push_v2(text, text, bigint[], text[], text[], bytea[], text[]);
-- One push in one statement, so an op-only push is one round trip (its own transaction,
-- committed before the answer comes back). Inside a function every statement takes a new
-- snapshot, so the seq read after the head row lock sees the previous holder's commit.
-- p_begun_* list the (seq, session, life) of every life the push's ops begin (livesBegunBy).
CREATE OR REPLACE FUNCTION tabula_push_v3(p_user text, p_client text, p_seqs bigint[], p_sessions text[], p_ops text[], p_boards bytea[], p_lives text[],
  p_begun_seqs bigint[], p_begun_sessions text[], p_begun_lives text[])
RETURNS TABLE (out_status text, out_last_seq bigint, out_appended bigint, out_head bigint, out_index bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_head bigint;
  v_last bigint;
  v_fresh bigint;
  v_max bigint;
  v_unknown bigint;
BEGIN
  -- The head row lock serialises this user's pushes across every instance (guarantee 3).
  -- FOR UPDATE locks without writing a row version; a new user's row is created first.
  SELECT h.head INTO v_head FROM tabula_heads h WHERE h.user_id = p_user FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO tabula_heads (user_id, head) VALUES (p_user, 0) ON CONFLICT (user_id) DO NOTHING;
    SELECT h.head INTO v_head FROM tabula_heads h WHERE h.user_id = p_user FOR UPDATE;
  END IF;
  SELECT c.last_seq INTO v_last FROM tabula_clients c WHERE c.user_id = p_user AND c.client_id = p_client;
  v_last := coalesce(v_last, 0);
  SELECT count(*), max(q) INTO v_fresh, v_max FROM unnest(p_seqs) AS t(q) WHERE q > v_last;
  IF v_fresh = 0 THEN
    RETURN QUERY SELECT 'applied'::text, v_last, 0::bigint, v_head, NULL::bigint;
    RETURN;
  END IF;
  -- The seqs are distinct: the new ones are lastSeq+1, lastSeq+2, … exactly when the highest is lastSeq + their count.
  IF v_max <> v_last + v_fresh THEN
    RETURN QUERY SELECT 'gap'::text, v_last, 0::bigint, v_head, NULL::bigint;
    RETURN;
  END IF;
  -- Guarantee 9: the first new board item naming a life that neither a stored op nor an earlier new item began.
  SELECT min(t.i) INTO v_unknown
    FROM unnest(p_seqs, p_sessions, p_boards, p_lives) WITH ORDINALITY AS t(q, s, b, l, i)
    WHERE t.q > v_last AND t.b IS NOT NULL AND t.l <> ''
      AND NOT EXISTS (SELECT 1 FROM tabula_lives v WHERE v.user_id = p_user AND v.session_id = t.s AND v.after = t.l COLLATE "C")
      AND NOT EXISTS (SELECT 1 FROM unnest(p_begun_seqs, p_begun_sessions, p_begun_lives) AS d(q, s, a) WHERE d.q > v_last AND d.q < t.q AND d.s = t.s AND d.a = t.l);
  IF v_unknown IS NOT NULL THEN
    RETURN QUERY SELECT 'unknown-life'::text, v_last, 0::bigint, v_head, v_unknown - 1;
    RETURN;
  END IF;
  INSERT INTO tabula_items (user_id, position, client_id, session_id, op, board, life_after)
    SELECT p_user, v_head + (t.q - v_last), p_client, t.s, t.o, t.b, t.l
    FROM unnest(p_seqs, p_sessions, p_ops, p_boards, p_lives) AS t(q, s, o, b, l) WHERE t.q > v_last;
  INSERT INTO tabula_lives (user_id, session_id, after)
    SELECT DISTINCT p_user, t.s, t.a FROM unnest(p_begun_seqs, p_begun_sessions, p_begun_lives) AS t(q, s, a) WHERE t.q > v_last
    ON CONFLICT DO NOTHING;
  UPDATE tabula_heads SET head = v_head + v_fresh WHERE user_id = p_user;
  INSERT INTO tabula_clients (user_id, client_id, last_seq) VALUES (p_user, p_client, v_max)
    ON CONFLICT (user_id, client_id) DO UPDATE SET last_seq = excluded.last_seq;
  RETURN QUERY SELECT 'applied'::text, v_max, v_fresh, v_head + v_fresh, NULL::bigint;
END
$fn$;
`;

/** Ops stored before tabula_lives existed that may begin a life (see livesOfStoredOps), a page at a time. */
const LIFE_CANDIDATES = `SELECT position, user_id, session_id, op FROM tabula_items
WHERE op IS NOT NULL AND (strpos(op, '"kind":"session.delete"') > 0 OR strpos(op, '"after":"') > 0) AND (user_id, position) > ($1, $2::bigint)
ORDER BY user_id, position LIMIT 500`;

const PUSH = 'SELECT out_status, out_last_seq, out_appended, out_head, out_index FROM tabula_push_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)';

/**
 * An item's wire JSON (a `PullItem`) from its row `i`: PostgreSQL concatenates
 * the stored op text (to_json escapes the ids) and base64s board bytes (encode
 * wraps lines at 76 characters; translate takes the newlines out), so a page
 * arrives as one string per item.
 */
const ITEM_JSON = `CASE
  WHEN i.op IS NOT NULL THEN '{"clientId":' || coalesce(to_json(i.client_id)::text, 'null') || ',"op":' || i.op || '}'
  ELSE '{"clientId":' || coalesce(to_json(i.client_id)::text, 'null') || ',"board":{"sessionId":' || to_json(i.session_id)::text
    || ',"update":"' || translate(encode(i.board, 'base64'), E'\\n', '') || '"'
    || coalesce(',"after":' || to_json(i.life_after)::text, '') || '}}'
END`;

/** A page's candidates: the $3 + 1 items of user $1 after position $2, one more than the page holds so that their count says `more`. */
const CANDIDATES = 'FROM tabula_items WHERE user_id = $1 AND position > $2::bigint ORDER BY position LIMIT $3::bigint + 1';

/**
 * The rows of a page whose cutoff CTE `c` (candidates `total`, last position
 * `last`) is given: the items up to `last` in their JSON, then one trailer row
 * with a null position that carries `total`. The trailer sorts last (nulls
 * last) and always comes, so an empty page still says how many candidates
 * there were. `last` reaches the index scan as an InitPlan in its index
 * condition: the scan stops there, and no item after it is read.
 */
const PAGE_UP_TO_LAST = `(SELECT i.position, ${ITEM_JSON} AS json, NULL::bigint AS total FROM tabula_items i
  WHERE i.user_id = $1 AND i.position > $2::bigint AND i.position <= (SELECT last FROM c) ORDER BY i.position LIMIT $3::bigint)
UNION ALL
SELECT NULL, NULL, c.total FROM c`;

/**
 * A page bounded in bytes (guarantee 8), fast: `last` is the last candidate
 * when an upper bound of all the candidates' JSON lengths fits in the budget
 * $4, else null, and then no item is read whole and {@link PAGE_EXACT_ROWS}
 * decides. The bound takes octet_length only, which reads a TOASTed value's
 * length from its pointer: an id's JSON is at most 6 bytes a byte plus its
 * quotes (to_json writes a control character as \u00XX; `null` is 4), an
 * op's frame is 23 bytes and a board's 65 (72 covers both), base64 is 4 bytes
 * per 3 rounded up. Pages of ops and small boards are far under the budget
 * and end here.
 *
 * Two index scans over the same rows, lengths then items, and no window: a
 * running sum over whole rows cost 3.5× the page without a budget (measured,
 * 1,000 small ops: 2.1 ms of planning and execution against 0.6 ms; this
 * statement 1.0 ms).
 */
const PAGE_BOUNDED_ROWS = `WITH c AS (
  SELECT count(*) AS total, CASE WHEN coalesce(sum(b.bound) <= $4::bigint, true) THEN max(b.position) END AS last
  FROM (SELECT position, coalesce(octet_length(op), (octet_length(board) + 2) / 3 * 4)
      + 6 * (octet_length(session_id) + coalesce(octet_length(client_id), 0) + coalesce(octet_length(life_after), 0)) + 72 AS bound
    ${CANDIDATES}) b
)
${PAGE_UP_TO_LAST}`;

/**
 * The page bounded in bytes, exactly: each candidate's JSON length (to_json
 * of the ids, octet_length of the rest, as ITEM_JSON builds it) and a running
 * sum over the candidates' positions and lengths only; `last` is the last one
 * inside the budget, the first always. Only the items up to it are read whole,
 * so only they are detoasted and travel (EXPLAIN (ANALYZE, BUFFERS) over 3 MB
 * boards: a 1-byte budget reads one board's TOAST pages, a 9 MiB budget two).
 * Lengths are int (a bytea is under 1 GiB), so their sum is a bigint, not a
 * numeric.
 */
const PAGE_EXACT_ROWS = `WITH c AS (
  SELECT count(*) AS total, max(s.position) FILTER (WHERE s.n <= $3::bigint AND (s.n = 1 OR s.bytes <= $4::bigint)) AS last
  FROM (
    SELECT b.position, row_number() OVER w AS n, sum(b.size) OVER w AS bytes
    FROM (SELECT position, CASE
        WHEN op IS NOT NULL THEN 19 + octet_length(coalesce(to_json(client_id)::text, 'null')) + octet_length(op)
        ELSE 48 + octet_length(coalesce(to_json(client_id)::text, 'null')) + octet_length(to_json(session_id)::text) + (octet_length(board) + 2) / 3 * 4
          + coalesce(9 + octet_length(to_json(life_after)::text), 0)
      END AS size
      ${CANDIDATES}) b
    WINDOW w AS (ORDER BY b.position ROWS UNBOUNDED PRECEDING)
  ) s
)
${PAGE_UP_TO_LAST}`;

/**
 * A statement run by name: pg parses it once per pooled connection and
 * PostgreSQL plans it there (custom plans for five runs, then a generic one
 * when it costs no more; index scans either way, the TOAST reads the same).
 * Measured on pages of 1,000 small ops, PostgreSQL's CPU per page: 2.4 ms by
 * text, 1.4 ms by name on a table not yet analyzed (planning without
 * statistics is dear); 1.7 and 1.4 ms on an analyzed one. Named statements
 * need the session they were prepared in: behind PgBouncer, session pooling
 * (or 1.21+ with max_prepared_statements), which LISTEN needs anyway.
 */
interface NamedStatement {
  readonly name: string;
  readonly text: string;
}

/**
 * A pull's page: PAGE_BOUNDED, and PAGE_EXACT when the bound does not fit (a statement of its own
 * that needs nothing from the first, so the two share no snapshot). Rows: position, json, total (see
 * pageOf). $1 user, $2 after, $3 limit, $4 maxBytes.
 */
const PAGE_BOUNDED: NamedStatement = { name: 'tabula_page_bounded_v1', text: `${PAGE_BOUNDED_ROWS} ORDER BY 1` };
const PAGE_EXACT: NamedStatement = { name: 'tabula_page_exact_v1', text: `${PAGE_EXACT_ROWS} ORDER BY 1` };

/**
 * A poke's read: the user's head and, in the same snapshot, the page after $2 as PAGE_BOUNDED or
 * PAGE_EXACT reads it (the head, then their columns; no rows when the user has no head row).
 */
const pokePage = (rows: string): string => `SELECT h.head, p.position, p.json, p.total FROM tabula_heads h LEFT JOIN LATERAL (${rows}) p ON true WHERE h.user_id = $1 ORDER BY p.position`;
const POKE_BOUNDED: NamedStatement = { name: 'tabula_poke_bounded_v1', text: pokePage(PAGE_BOUNDED_ROWS) };
const POKE_EXACT: NamedStatement = { name: 'tabula_poke_exact_v1', text: pokePage(PAGE_EXACT_ROWS) };

interface PushRow {
  out_status: 'applied' | 'gap' | 'unknown-life';
  out_last_seq: string;
  out_appended: string;
  out_head: string;
  out_index: string | null;
}

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions extends StoreOptions {
  /** Delay before reopening a dropped LISTEN connection, in ms. @default 1000 */
  readonly reconnectMs?: number;
}

/**
 * A `pg.Pool`, typed by shape so that these declarations compile for users
 * who have no `@types/pg` (pg is an optional peer dependency).
 */
export interface PgPoolLike {
  /** `pool.connect()`: the store borrows one client for LISTEN. */
  connect: (...args: never[]) => unknown;
  /** `pool.query()`: every read and write. */
  query: (...args: never[]) => unknown;
  /** `pool.end()`: called on `close()` only for a pool the store made itself. */
  end: (...args: never[]) => unknown;
}

/**
 * A {@link ServerStore} on PostgreSQL. Given a URL it owns its pool and ends
 * it on `close()`; given a `pg.Pool` it borrows one connection for LISTEN
 * and leaves the pool open. Throws `server/driver-missing` without `pg`.
 */
export function postgresStore(connection: string | PgPoolLike, options: PostgresStoreOptions = {}): ServerStore {
  const pg = loadDriver<typeof Pg>('pg', 'postgresStore');
  const compactAfter = options.compactBoardAfter ?? 100;
  const compactor = createBoardCompactor(options.compactBudgetBytes ?? 1024 * 1024);
  const reconnectMs = options.reconnectMs ?? 1000;
  const ownsPool = typeof connection === 'string';
  const pool = typeof connection === 'string' ? new pg.Pool({ connectionString: connection }) : (connection as unknown as Pg.Pool);
  // An idle pooled connection that dies (a database restart) emits 'error' on the pool, which
  // would end the process unhandled; the next query simply opens a new connection.
  if (ownsPool) pool.on('error', (error) => console.error('tabula-server: an idle PostgreSQL connection failed', error.message));
  const listeners = new PokeListeners();
  let listener: Pg.PoolClient | undefined;
  let closed = false;
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined;

  async function migrate(): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
      const lives = await client.query<{ found: boolean }>("SELECT to_regclass('tabula_lives') IS NOT NULL AS found");
      await client.query(SCHEMA);
      if (!lives.rows[0]!.found) await backfillLives(client);
      // Drawn by the first instance to migrate this database; every later one finds it.
      await client.query("INSERT INTO tabula_meta (key, value) VALUES ('epoch', $1) ON CONFLICT (key) DO NOTHING", [randomUUID()]);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /** Fills the new tabula_lives from the ops already stored, in pages (see LIFE_CANDIDATES). */
  async function backfillLives(client: Pg.PoolClient): Promise<void> {
    let from: [string, string] = ['', '0'];
    for (;;) {
      const rows = (await client.query<{ position: string; user_id: string; session_id: string; op: string }>(LIFE_CANDIDATES, from)).rows;
      if (rows.length === 0) return;
      const lives = livesOfStoredOps(rows.map((row) => ({ userId: row.user_id, sessionId: row.session_id, op: row.op })));
      if (lives.length > 0) {
        await client.query('INSERT INTO tabula_lives (user_id, session_id, after) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ON CONFLICT DO NOTHING', [
          lives.map((life) => life[0]),
          lives.map((life) => life[1]),
          lives.map((life) => life[2]),
        ]);
      }
      const last = rows[rows.length - 1]!;
      from = [last.user_id, last.position];
    }
  }

  let ignored = 0;
  let ignoredLoggedAt = -Infinity;
  /** Counts a notification that was not a poke of ours; says so at most once per IGNORED_LOG_INTERVAL_MS. */
  function ignore(): void {
    ignored++;
    const now = Date.now();
    if (now - ignoredLoggedAt < IGNORED_LOG_INTERVAL_MS) return;
    console.warn(`tabula-server: ignored ${ignored} notification(s) on ${CHANNEL} that are not a Tabula poke; something else sends on that channel.`);
    ignoredLoggedAt = now;
    ignored = 0;
  }

  async function listen(): Promise<void> {
    const client = await pool.connect();
    client.on('notification', (message) => {
      if (message.channel !== CHANNEL) return;
      const poke = parsePoke(message.payload);
      if (poke === null) return ignore();
      hint(poke.userId, poke.after);
    });
    const dropped = (): void => {
      if (listener !== client) return;
      listener = undefined;
      client.release(true);
      if (!closed) reconnectTimer = setTimeout(() => void relisten(), reconnectMs);
    };
    client.on('error', dropped);
    client.on('end', dropped);
    await client.query(`LISTEN ${CHANNEL}`);
    listener = client;
  }

  async function relisten(): Promise<void> {
    try {
      await listen();
      // A notification may have been lost while no connection listened: read every subscribed user's log again.
      for (const userId of listeners.users()) hint(userId, undefined);
    } catch (error) {
      console.error('tabula-server: reopening the LISTEN connection failed; retrying', error);
      if (!closed) reconnectTimer = setTimeout(() => void relisten(), reconnectMs);
    }
  }

  let ready: Promise<void> | undefined;
  let epochValue: Promise<string> | undefined;
  const open = (): Promise<void> => {
    if (closed) return Promise.reject(new TabulaError('storage/closed', 'This postgresStore is closed; create a new one.'));
    ready ??= migrate().then(listen);
    return ready;
  };

  /** Runs `work` in a transaction on one pooled connection. */
  async function inTransaction<T>(work: (client: Pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * What this instance has read for a user with subscribers here. `delivered` is the head of its last
   * poke of the user (undefined before the first): the next read starts there, so each poke continues
   * the one before. `wanted` is a hint that came while a read ran; `from` the lowest position hints named
   * before anything was delivered.
   */
  interface Reader {
    delivered: number | undefined;
    from: number | undefined;
    wanted: boolean;
    running: Promise<void> | undefined;
  }
  const readers = new Map<string, Reader>();

  /**
   * A hint that `userId`'s log may have grown past `from` (undefined: unknown, after a lost
   * connection). Ignored for users without subscribers here; otherwise one read runs, and hints that
   * come while it runs make one more after it.
   */
  function hint(userId: string, from: number | undefined): void {
    if (closed || !listeners.has(userId)) return;
    let reader = readers.get(userId);
    if (!reader) readers.set(userId, (reader = { delivered: undefined, from: undefined, wanted: false, running: undefined }));
    reader.wanted = true;
    if (from !== undefined) reader.from = Math.min(from, reader.from ?? from);
    reader.running ??= drain(userId, reader);
  }

  async function drain(userId: string, reader: Reader): Promise<void> {
    try {
      while (reader.wanted && !closed && listeners.has(userId)) {
        reader.wanted = false;
        const from = reader.delivered ?? reader.from;
        reader.from = undefined;
        try {
          await readAndPoke(userId, reader, from);
        } catch (error) {
          console.error('tabula-server: reading the items of a poke failed; subscribers catch up on their next pull', error);
        }
      }
    } finally {
      reader.running = undefined;
      if (!listeners.has(userId) && readers.get(userId) === reader) readers.delete(userId);
    }
  }

  /**
   * One read of the tables for a poke: the head and the page after `from`, in one snapshot. Pokes when
   * the head passed what was delivered, with the page when it reaches the head and is small enough.
   */
  async function readAndPoke(userId: string, reader: Reader, from: number | undefined): Promise<void> {
    if (from === undefined) {
      const head = Number((await pool.query<{ head: string }>('SELECT head FROM tabula_heads WHERE user_id = $1', [userId])).rows[0]?.head ?? 0);
      reader.delivered = head;
      listeners.poke(userId, head);
      return;
    }
    const values = [userId, from, POKE_MAX_ITEMS, POKE_ITEMS_MAX_BYTES];
    let rows = await pageRows(POKE_BOUNDED, values);
    let page = pageOf(userId, rows, 1);
    // The bound did not fit: the exact page, with the head read again in its snapshot.
    if (!page) page = pageOf(userId, (rows = await pageRows(POKE_EXACT, values)), 1) ?? EMPTY_PAGE;
    // No head row: the user has pushed nothing.
    if (rows.length === 0) return;
    const head = Number(rows[0]![0]);
    // A hint about nothing new here (a repeat, or one that named a position past the head).
    if (head <= from) return;
    reader.delivered = head;
    const appended = page.more ? undefined : pokeItems(from, page.items);
    if (appended) listeners.poke(userId, head, appended);
    else listeners.poke(userId, head);
  }

  /** The rows of a page statement (PAGE_*, POKE_*), as arrays. */
  async function pageRows(statement: NamedStatement, values: unknown[]): Promise<PageRow[]> {
    return (await pool.query<PageRow>({ ...statement, values, rowMode: 'array' })).rows;
  }

  const pokesInFlight = new Set<Promise<void>>();
  /** The last poke sent for each user, which the next one waits for. */
  const pokeChains = new Map<string, Promise<void>>();
  /**
   * The poke goes out after COMMIT, not inside the transaction: a NOTIFY in a
   * transaction holds PostgreSQL's global notify lock across the commit's
   * flush, which serialises every pushing user's commits (measured: push
   * throughput a third lower). The push is answered without waiting for it.
   * A crash between COMMIT and NOTIFY loses only the poke; clients pull on
   * reconnect and poll without one. The payload names the user, the new
   * head and the head before; never items (see the module comment).
   */
  function notify(userId: string, head: number, after: number): void {
    const payload = JSON.stringify({ u: userId, h: head, a: after } satisfies PokePayload);
    // A user's pokes go out one after the other, in push order: on two pool connections a later poke
    // could overtake an earlier one, and listeners would read for it first.
    const sent: Promise<void> = (pokeChains.get(userId) ?? Promise.resolve())
      .then(() => pool.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]))
      .then(
        () => {},
        (error: unknown) => console.error('tabula-server: sending a poke failed; listeners will catch up on their next pull', error),
      )
      .finally(() => {
        pokesInFlight.delete(sent);
        if (pokeChains.get(userId) === sent) pokeChains.delete(userId);
      });
    pokeChains.set(userId, sent);
    pokesInFlight.add(sent);
  }

  /**
   * Drops the session's board updates of lives older than the newest one a stored op began (its
   * delete ended them: every client drops them too, whichever was pushed first; never a board row's
   * claim, and in code-unit order as clients compare), then, once life `after` holds more than
   * `compactAfter`, merges its oldest rows within the compactor's budget (see createBoardCompactor).
   * `IS NOT DISTINCT FROM` matches NULL too: a board from before lives were named is one life of its own.
   */
  async function compact(client: Pg.PoolClient, userId: string, sessionId: string, after: string | null): Promise<void> {
    await client.query(
      'DELETE FROM tabula_items WHERE user_id = $1 AND session_id = $2 AND board IS NOT NULL AND life_after COLLATE "C" < ' +
        '(SELECT max(after) FROM tabula_lives WHERE user_id = $1 AND session_id = $2)',
      [userId, sessionId],
    );
    const life = 'user_id = $1 AND session_id = $2 AND board IS NOT NULL AND life_after IS NOT DISTINCT FROM $3';
    const count = await client.query<{ n: string }>(`SELECT count(*) AS n FROM tabula_items WHERE ${life}`, [userId, sessionId, after]);
    if (Number(count.rows[0]!.n) <= compactAfter) return;
    // Sizes a page at a time, oldest first, until the window is chosen: not the whole history.
    const window = compactor.window();
    const page = 500;
    let from = 0;
    let open = true;
    while (open) {
      const sizes = await client.query<{ position: string; size: number }>(
        `SELECT position, octet_length(board) AS size FROM tabula_items WHERE ${life} AND position > $4 ORDER BY position LIMIT ${page}`,
        [userId, sessionId, after, from],
      );
      for (const row of sizes.rows) {
        open = window.offer(Number(row.position), row.size);
        if (!open) break;
      }
      if (sizes.rows.length < page) break;
      from = Number(sizes.rows[sizes.rows.length - 1]!.position);
    }
    const positions = window.positions();
    if (positions.length === 0) return;
    // A compaction's rows are consecutive in their life: every row of the life between two positions.
    const range = `${life} AND position BETWEEN $4 AND $5`;
    const rows = await client.query<{ position: string; board: Buffer }>(`SELECT position, board FROM tabula_items WHERE ${range} ORDER BY position`, [
      userId,
      sessionId,
      after,
      positions[0],
      positions[positions.length - 1],
    ]);
    const runs = compactor.merge(
      userId,
      sessionId,
      rows.rows.map((row) => ({ position: Number(row.position), board: row.board })),
    );
    for (const run of runs) {
      const last = run.positions[run.positions.length - 1]!;
      await client.query(`DELETE FROM tabula_items WHERE ${range}`, [userId, sessionId, after, run.positions[0], last]);
      await client.query('INSERT INTO tabula_items (user_id, position, client_id, session_id, op, board, life_after) VALUES ($1, $2, NULL, $3, NULL, $4, $5)', [
        userId,
        last,
        sessionId,
        Buffer.from(run.merged.buffer, run.merged.byteOffset, run.merged.byteLength),
        after,
      ]);
    }
  }

  return {
    async push(userId, clientId, items: readonly StorePushItem[]) {
      await open();
      const seqs: number[] = [];
      const sessions: string[] = [];
      const ops: (string | null)[] = [];
      const boards: (Buffer | null)[] = [];
      const lives: (string | null)[] = [];
      const begun: { seqs: number[]; sessions: string[]; lives: string[] } = { seqs: [], sessions: [], lives: [] };
      // The (session, life, seq) of this push's board updates.
      const boardItems: [string, string | null, number][] = [];
      for (const item of items) {
        seqs.push(item.seq);
        if ('op' in item) {
          sessions.push(item.op.sessionId);
          ops.push(JSON.stringify(item.op));
          boards.push(null);
          lives.push(null);
          for (const life of livesBegunBy(item.op)) {
            begun.seqs.push(item.seq);
            begun.sessions.push(item.op.sessionId);
            begun.lives.push(life);
          }
        } else {
          sessions.push(item.board.sessionId);
          ops.push(null);
          const bytes = item.board.update;
          boards.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
          const after = item.board.after ?? null;
          lives.push(after);
          boardItems.push([item.board.sessionId, after, item.seq]);
        }
      }
      const params = [userId, clientId, seqs, sessions, ops, boards, lives, begun.seqs, begun.sessions, begun.lives];
      let result: StorePushResult;
      if (boardItems.length === 0) {
        // One statement in its own transaction: resolved after PostgreSQL has committed it.
        result = toPushResult((await pool.query<PushRow>(PUSH, params)).rows[0]);
      } else {
        // Compaction reads the rows just written, so it needs statements of its own in the same transaction.
        result = await inTransaction(async (client) => {
          const pushed = toPushResult((await client.query<PushRow>(PUSH, params)).rows[0]);
          if (pushed.status !== 'applied' || pushed.appended === 0) return pushed;
          // The (session, life) pairs the push added board updates to; retried items added none.
          const firstNew = pushed.lastSeq - pushed.appended + 1;
          const added = new Map(boardItems.filter(([, , seq]) => seq >= firstNew).map(([sessionId, after]) => [JSON.stringify([sessionId, after]), [sessionId, after] as const]));
          for (const [sessionId, after] of added.values()) await compact(client, userId, sessionId, after);
          return pushed;
        });
      }
      if (result.status === 'applied' && result.appended > 0) notify(userId, result.head, result.head - result.appended);
      return result;
    },
    async pull(userId, after, limit, maxBytes): Promise<StorePullPage> {
      await open();
      const values = [userId, after, limit, pageBudget(maxBytes)];
      return pageOf(userId, await pageRows(PAGE_BOUNDED, values), 0) ?? pageOf(userId, await pageRows(PAGE_EXACT, values), 0) ?? EMPTY_PAGE;
    },
    async head(userId) {
      await open();
      const result = await pool.query<{ head: string }>('SELECT head FROM tabula_heads WHERE user_id = $1', [userId]);
      return Number(result.rows[0]?.head ?? 0);
    },
    async epoch() {
      await open();
      // The same for as long as the database is this one: read once.
      epochValue ??= pool.query<{ value: string }>("SELECT value FROM tabula_meta WHERE key = 'epoch'").then((result) => result.rows[0]!.value);
      const reading = epochValue;
      return reading.catch((error: unknown) => {
        if (epochValue === reading) epochValue = undefined;
        throw error;
      });
    },
    async lastSeq(userId, clientId) {
      await open();
      const result = await pool.query<{ last_seq: string }>('SELECT last_seq FROM tabula_clients WHERE user_id = $1 AND client_id = $2', [userId, clientId]);
      return Number(result.rows[0]?.last_seq ?? 0);
    },
    async subscribe(userId, onPoke) {
      await open();
      const off = listeners.add(userId, onPoke);
      return () => {
        off();
        // What was read for the user goes with its last subscriber (a running read drops it when done).
        const reader = readers.get(userId);
        if (reader && !reader.running && !listeners.has(userId)) readers.delete(userId);
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(reconnectTimer);
      listeners.clear();
      await ready?.catch(() => {});
      await Promise.all([...pokesInFlight, ...[...readers.values()].map((reader) => reader.running)]);
      const client = listener;
      listener = undefined;
      client?.release(true);
      if (ownsPool) await pool.end();
    },
  };
}

/** The NOTIFY payload of a poke: the user, the new head and the head before. Only a hint (see the module comment). */
interface PokePayload {
  u: string;
  h: number;
  a: number;
}

/**
 * The user and position a notification names, or null when it is not a poke of ours: too long, not
 * JSON, a user id that breaks the name rules (no user could hold it), positions that are not whole
 * numbers with 0 ≤ a < h. Other fields are never read: a listener takes nothing else from a
 * notification.
 */
function parsePoke(payload: string | undefined): { userId: string; after: number } | null {
  if (payload === undefined || payload.length > POKE_PAYLOAD_MAX_LENGTH) return null;
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { u, h, a } = value as Record<string, unknown>;
  if (findNameProblem(u, ID_MAX_LENGTH) !== null) return null;
  if (!Number.isSafeInteger(h) || !Number.isSafeInteger(a) || (a as number) < 0 || (a as number) >= (h as number)) return null;
  return { userId: u as string, after: a as number };
}

/** A row of a page statement (PAGE_BOUNDED, PAGE_EXACT, or POKE_* with the head first), as text. */
type PageRow = (string | null)[];

/** A page without items: no candidates (or a limit of 0). */
const EMPTY_PAGE: StorePullPage = { items: [], more: false };

/**
 * The page in a page statement's rows, their columns from `at` on (position, json, total): the items,
 * then the trailer, with a null position and the candidates' count. Undefined when candidates came back
 * without a single item: PAGE_BOUNDED's bound did not fit, and PAGE_EXACT decides (which returns none
 * only for a limit of 0: then the page is {@link EMPTY_PAGE}, as on SQLite).
 */
function pageOf(userId: string, rows: readonly PageRow[], at: number): StorePullPage | undefined {
  const total = Number(rows[rows.length - 1]?.[at + 2] ?? 0);
  const items: StorePulledItem[] = [];
  for (let i = 0; i < rows.length - 1; i++) items.push(pulledItem(userId, rows[i]![at]!, rows[i]![at + 1] ?? null));
  if (items.length === 0) return total > 0 ? undefined : EMPTY_PAGE;
  return { items, more: total > items.length };
}

/** A page row as the store hands it out; a row whose JSON the query could not build is corrupt. */
function pulledItem(userId: string, position: string, json: string | null): StorePulledItem {
  if (json === null) throw new TabulaError('storage/failed', `Item ${position} of user ${userId} holds neither an op nor a board update.`);
  return { position: Number(position), json };
}

function toPushResult(row: PushRow | undefined): StorePushResult {
  if (row === undefined) throw new TabulaError('storage/failed', 'tabula_push_v3 returned no row.');
  if (row.out_status === 'gap') return { status: 'gap', lastSeq: Number(row.out_last_seq) };
  if (row.out_status === 'unknown-life') return { status: 'unknown-life', index: Number(row.out_index) };
  return { status: 'applied', lastSeq: Number(row.out_last_seq), appended: Number(row.out_appended), head: Number(row.out_head) };
}
