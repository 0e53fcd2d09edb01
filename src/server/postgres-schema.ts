/**
 * The PostgreSQL store's schema: its tables, the push function, and the
 * migration that creates them on first use. The migration runs under an
 * advisory lock, so instances starting together do not race, and fills in
 * what a database created by an older version lacks (the session lives its
 * stored ops began). Reading and writing the tables is the business of
 * postgres-push.ts and postgres-pages.ts.
 *
 * Order keys and session lives are compared with `COLLATE "C"`: they are
 * ASCII, compared by clients and SQLite in code-unit order, and a database
 * collation (ICU, en_US) orders them otherwise.
 */
import type * as Pg from 'pg';
import { randomUUID } from 'node:crypto';
import { livesOfStoredOps } from './store.js';

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

/**
 * Creates or upgrades the schema, and draws the storage's epoch (guarantee 10) on a database that has
 * none, in one transaction under the advisory lock.
 */
export async function migrateSchema(pool: Pg.Pool): Promise<void> {
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
