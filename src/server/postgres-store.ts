/**
 * `postgresStore(url | pool)`: the store past one machine. Any number of
 * stateless server instances share one PostgreSQL; a push takes the user's
 * head row lock, so one user's pushes commit one at a time and positions
 * follow commit order on every instance. Pokes travel by `NOTIFY`, sent
 * right after the push commits, to every instance's `LISTEN` connection.
 *
 * The schema is created on first use, under an advisory lock so instances
 * starting together do not race. One connection is held for LISTEN; if it
 * drops, it is reopened and every subscriber is poked (a notification may
 * have been lost in between, and an extra pull is harmless).
 */
import type * as Pg from 'pg';
import { TabulaError } from '../core/errors.js';
import { createBoardCompactor } from './board.js';
import { loadDriver } from './driver.js';
import { PokeListeners } from './listeners.js';
import { POKE_MAX_ITEMS, pokeItems, type ServerStore, type StoreOptions, type StorePokeItems, type StorePullPage, type StorePulledItem, type StorePushItem, type StorePushResult } from './store.js';

const CHANNEL = 'tabula_poke';
/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. */
const NOTIFY_MAX_BYTES = 8000;
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
-- One push in one statement, so an op-only push is one round trip (its own transaction,
-- committed before the answer comes back). Inside a function every statement takes a new
-- snapshot, so the seq read after the head row lock sees the previous holder's commit.
CREATE OR REPLACE FUNCTION tabula_push_v2(p_user text, p_client text, p_seqs bigint[], p_sessions text[], p_ops text[], p_boards bytea[], p_lives text[])
RETURNS TABLE (out_status text, out_last_seq bigint, out_appended bigint, out_head bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_head bigint;
  v_last bigint;
  v_fresh bigint;
  v_max bigint;
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
    RETURN QUERY SELECT 'applied'::text, v_last, 0::bigint, v_head;
    RETURN;
  END IF;
  -- The seqs are distinct: the new ones are lastSeq+1, lastSeq+2, … exactly when the highest is lastSeq + their count.
  IF v_max <> v_last + v_fresh THEN
    RETURN QUERY SELECT 'gap'::text, v_last, 0::bigint, v_head;
    RETURN;
  END IF;
  INSERT INTO tabula_items (user_id, position, client_id, session_id, op, board, life_after)
    SELECT p_user, v_head + (t.q - v_last), p_client, t.s, t.o, t.b, t.l
    FROM unnest(p_seqs, p_sessions, p_ops, p_boards, p_lives) AS t(q, s, o, b, l) WHERE t.q > v_last;
  UPDATE tabula_heads SET head = v_head + v_fresh WHERE user_id = p_user;
  INSERT INTO tabula_clients (user_id, client_id, last_seq) VALUES (p_user, p_client, v_max)
    ON CONFLICT (user_id, client_id) DO UPDATE SET last_seq = excluded.last_seq;
  RETURN QUERY SELECT 'applied'::text, v_max, v_fresh, v_head + v_fresh;
END
$fn$;
`;

const PUSH = 'SELECT out_status, out_last_seq, out_appended, out_head FROM tabula_push_v2($1, $2, $3, $4, $5, $6, $7)';

/**
 * A page of a user's log, each item already in its wire JSON (a `PullItem`):
 * PostgreSQL concatenates the stored op text (to_json escapes the ids) and
 * base64s board bytes (encode wraps lines at 76 characters; translate takes
 * the newlines out), so the page arrives as one string per item.
 */
const PAGE = `
SELECT position, CASE
  WHEN op IS NOT NULL THEN '{"clientId":' || coalesce(to_json(client_id)::text, 'null') || ',"op":' || op || '}'
  ELSE '{"clientId":' || coalesce(to_json(client_id)::text, 'null') || ',"board":{"sessionId":' || to_json(session_id)::text
    || ',"update":"' || translate(encode(board, 'base64'), E'\\n', '') || '"'
    || coalesce(',"after":' || to_json(life_after)::text, '') || '}}'
END AS json
FROM tabula_items WHERE user_id = $1 AND position > $2 ORDER BY position LIMIT $3`;

interface PushRow {
  out_status: 'applied' | 'gap';
  out_last_seq: string;
  out_appended: string;
  out_head: string;
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
  connect: (...args: never[]) => unknown;
  query: (...args: never[]) => unknown;
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
  const heads = new Map<string, number>();
  let listener: Pg.PoolClient | undefined;
  let closed = false;
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined;

  async function migrate(): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
      await client.query(SCHEMA);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  async function listen(): Promise<void> {
    const client = await pool.connect();
    client.on('notification', (message) => {
      if (message.channel !== CHANNEL || message.payload === undefined) return;
      const { u, h, a, i } = JSON.parse(message.payload) as PokePayload;
      heads.set(u, Math.max(h, heads.get(u) ?? 0));
      const appended = a !== undefined && i !== undefined ? { after: a, items: i.map(([position, item]) => ({ position, json: JSON.stringify(item) })) } : undefined;
      listeners.poke(u, h, appended);
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
      listeners.pokeAll((userId) => heads.get(userId) ?? 0);
    } catch (error) {
      console.error('tabula-server: reopening the LISTEN connection failed; retrying', error);
      if (!closed) reconnectTimer = setTimeout(() => void relisten(), reconnectMs);
    }
  }

  let ready: Promise<void> | undefined;
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

  const pokesInFlight = new Set<Promise<void>>();
  /** The last poke sent for each user, which the next one waits for. */
  const pokeChains = new Map<string, Promise<void>>();
  /**
   * The poke goes out after COMMIT, not inside the transaction: a NOTIFY in a
   * transaction holds PostgreSQL's global notify lock across the commit's
   * flush, which serialises every pushing user's commits (measured: push
   * throughput a third lower). The push is answered without waiting for it.
   * A crash between COMMIT and NOTIFY loses only the poke; clients pull on
   * reconnect and poll without one.
   */
  function notify(userId: string, head: number, appended: StorePokeItems | undefined): void {
    const bare = JSON.stringify({ u: userId, h: head } satisfies PokePayload);
    // The items go in as they are (JSON text already); a payload too large for NOTIFY goes without them.
    const full = appended && `${bare.slice(0, -1)},"a":${appended.after},"i":[${appended.items.map((item) => `[${item.position},${item.json}]`).join(',')}]}`;
    const payload = full !== undefined && Buffer.byteLength(full) < NOTIFY_MAX_BYTES ? full : bare;
    // A user's pokes go out one after the other, in push order: on two pool connections a later poke
    // could overtake an earlier one, and a client then pulls instead of taking the items it carries.
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
   * Drops the session's board updates of lives older than the newest one stored (a delete ended them:
   * every client drops them too, whichever was pushed first), then, once life `after` holds more than
   * `compactAfter`, merges its oldest rows within the compactor's budget (see createBoardCompactor).
   * `IS NOT DISTINCT FROM` matches NULL too: a board from before lives were named is one life of its own.
   */
  async function compact(client: Pg.PoolClient, userId: string, sessionId: string, after: string | null): Promise<void> {
    await client.query(
      'DELETE FROM tabula_items WHERE user_id = $1 AND session_id = $2 AND board IS NOT NULL AND life_after < ' +
        '(SELECT max(life_after) FROM tabula_items WHERE user_id = $1 AND session_id = $2 AND board IS NOT NULL)',
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
      // The (session, life) pairs this push adds board updates to.
      const boardSessions = new Map<string, [string, string | null]>();
      for (const item of items) {
        seqs.push(item.seq);
        if ('op' in item) {
          sessions.push(item.op.sessionId);
          ops.push(JSON.stringify(item.op));
          boards.push(null);
          lives.push(null);
        } else {
          sessions.push(item.board.sessionId);
          ops.push(null);
          const bytes = item.board.update;
          boards.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
          const after = item.board.after ?? null;
          lives.push(after);
          boardSessions.set(JSON.stringify([item.board.sessionId, after]), [item.board.sessionId, after]);
        }
      }
      const params = [userId, clientId, seqs, sessions, ops, boards, lives];
      let appended: StorePokeItems | undefined;
      let result: StorePushResult;
      if (boardSessions.size === 0) {
        // One statement in its own transaction: resolved after PostgreSQL has committed it.
        result = toPushResult((await pool.query<PushRow>(PUSH, params)).rows[0]);
        if (result.status === 'applied' && result.appended > 0 && result.appended <= POKE_MAX_ITEMS) {
          // Ops are stored as sent, so their pulled JSON is known without reading it back: the new seqs
          // took the positions after the old head, in seq order.
          const after = result.head - result.appended;
          const firstSeq = result.lastSeq - result.appended + 1;
          const pulled: StorePulledItem[] = [];
          items.forEach((item, k) => {
            if (item.seq >= firstSeq) pulled.push({ position: after + item.seq - firstSeq + 1, json: `{"clientId":${JSON.stringify(clientId)},"op":${ops[k]!}}` });
          });
          appended = pokeItems(after, pulled);
        }
      } else {
        // Compaction reads the rows just written, so it needs statements of its own in the same transaction.
        result = await inTransaction(async (client) => {
          const pushed = toPushResult((await client.query<PushRow>(PUSH, params)).rows[0]);
          if (pushed.status !== 'applied' || pushed.appended === 0) return pushed;
          for (const [sessionId, after] of boardSessions.values()) await compact(client, userId, sessionId, after);
          if (pushed.appended <= POKE_MAX_ITEMS) {
            // After compaction, the pull's own query over the push's positions: what a pull would get now.
            const after = pushed.head - pushed.appended;
            appended = pokeItems(after, await pageOf(client, userId, after, pushed.appended));
          }
          return pushed;
        });
      }
      if (result.status === 'applied' && result.appended > 0) notify(userId, result.head, appended);
      return result;
    },
    async pull(userId, after, limit): Promise<StorePullPage> {
      await open();
      const items = await pageOf(pool, userId, after, limit + 1);
      return { items: items.slice(0, limit), more: items.length > limit };
    },
    async head(userId) {
      await open();
      const result = await pool.query<{ head: string }>('SELECT head FROM tabula_heads WHERE user_id = $1', [userId]);
      return Number(result.rows[0]?.head ?? 0);
    },
    async lastSeq(userId, clientId) {
      await open();
      const result = await pool.query<{ last_seq: string }>('SELECT last_seq FROM tabula_clients WHERE user_id = $1 AND client_id = $2', [userId, clientId]);
      return Number(result.rows[0]?.last_seq ?? 0);
    },
    async subscribe(userId, onPoke) {
      await open();
      return listeners.add(userId, onPoke);
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(reconnectTimer);
      listeners.clear();
      await ready?.catch(() => {});
      await Promise.all(pokesInFlight);
      const client = listener;
      listener = undefined;
      client?.release(true);
      if (ownsPool) await pool.end();
    },
  };
}

/** The NOTIFY payload of a poke: user, head, and the pushed items (`a` the head before, `i` [position, item]) when they fit. */
interface PokePayload {
  u: string;
  h: number;
  a?: number;
  i?: [number, unknown][];
}

/** Up to `limit` items of `userId` after position `after`, in their wire JSON (the PAGE query). */
async function pageOf(client: Pick<Pg.Pool, 'query'>, userId: string, after: number, limit: number): Promise<StorePulledItem[]> {
  const result = await client.query<[string, string | null]>({ text: PAGE, values: [userId, after, limit], rowMode: 'array' });
  return result.rows.map(([position, json]) => {
    if (json === null) throw new TabulaError('storage/failed', `Item ${position} of user ${userId} holds neither an op nor a board update.`);
    return { position: Number(position), json };
  });
}

function toPushResult(row: PushRow | undefined): StorePushResult {
  if (row === undefined) throw new TabulaError('storage/failed', 'tabula_push_v1 returned no row.');
  if (row.out_status === 'gap') return { status: 'gap', lastSeq: Number(row.out_last_seq) };
  return { status: 'applied', lastSeq: Number(row.out_last_seq), appended: Number(row.out_appended), head: Number(row.out_head) };
}
