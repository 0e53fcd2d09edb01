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
import { mergeBoardUpdates } from './board.js';
import { loadDriver } from './driver.js';
import { PokeListeners } from './listeners.js';
import type { ServerStore, StoreOptions, StorePullPage, StorePulledItem, StorePushItem, StorePushResult } from './store.js';

const CHANNEL = 'tabula_poke';
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
CREATE INDEX IF NOT EXISTS tabula_items_board ON tabula_items (user_id, session_id, position) WHERE board IS NOT NULL;
`;

interface ItemRow {
  position: string;
  client_id: string | null;
  session_id: string;
  op: string | null;
  board: Buffer | null;
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
      const { u, h } = JSON.parse(message.payload) as { u: string; h: number };
      heads.set(u, Math.max(h, heads.get(u) ?? 0));
      listeners.poke(u, h);
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

  /** Runs `work` in a transaction, then `after` (outside it, on the same connection) once it committed. */
  async function inTransaction<T>(work: (client: Pg.PoolClient) => Promise<T>, after: (client: Pg.PoolClient, result: T) => Promise<void>): Promise<T> {
    await open();
    const client = await pool.connect();
    try {
      let result: T;
      try {
        await client.query('BEGIN');
        result = await work(client);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      }
      await after(client, result);
      return result;
    } finally {
      client.release();
    }
  }

  /**
   * The poke goes out after COMMIT, not inside the transaction: a NOTIFY in a
   * transaction holds PostgreSQL's global notify lock across the commit's
   * flush, which serialises every pushing user's commits (measured: push
   * throughput a third lower). A crash between COMMIT and NOTIFY loses only
   * the poke; clients pull on reconnect and poll without one.
   */
  async function notify(client: Pg.PoolClient, userId: string, result: StorePushResult): Promise<void> {
    if (result.status !== 'applied' || result.appended === 0) return;
    try {
      await client.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ u: userId, h: result.head })]);
    } catch (error) {
      console.error('tabula-server: sending a poke failed; listeners will catch up on their next pull', error);
    }
  }

  async function compact(client: Pg.PoolClient, userId: string, sessionId: string): Promise<void> {
    const count = await client.query<{ n: string }>('SELECT count(*) AS n FROM tabula_items WHERE user_id = $1 AND session_id = $2 AND board IS NOT NULL', [userId, sessionId]);
    if (Number(count.rows[0]!.n) <= compactAfter) return;
    const rows = await client.query<{ position: string; board: Buffer }>(
      'DELETE FROM tabula_items WHERE user_id = $1 AND session_id = $2 AND board IS NOT NULL RETURNING position, board',
      [userId, sessionId],
    );
    const sorted = rows.rows.map((row) => ({ position: Number(row.position), board: row.board })).sort((a, b) => a.position - b.position);
    const merged = mergeBoardUpdates(sorted.map((row) => row.board));
    await client.query('INSERT INTO tabula_items (user_id, position, client_id, session_id, op, board) VALUES ($1, $2, NULL, $3, NULL, $4)', [
      userId,
      sorted[sorted.length - 1]!.position,
      sessionId,
      Buffer.from(merged.buffer, merged.byteOffset, merged.byteLength),
    ]);
  }

  return {
    push(userId, clientId, items: readonly StorePushItem[]) {
      return inTransaction(async (client): Promise<StorePushResult> => {
        // The head row lock serialises this user's pushes across every instance (guarantee 3).
        // ON CONFLICT DO UPDATE locks the row, existing or new, in one round trip.
        const headRow = await client.query<{ head: string }>(
          'INSERT INTO tabula_heads (user_id, head) VALUES ($1, 0) ON CONFLICT (user_id) DO UPDATE SET head = tabula_heads.head RETURNING head',
          [userId],
        );
        let head = Number(headRow.rows[0]!.head);
        // A statement of its own, after the lock: its snapshot then sees the previous holder's commit.
        const seqRow = await client.query<{ last_seq: string }>('SELECT last_seq FROM tabula_clients WHERE user_id = $1 AND client_id = $2', [userId, clientId]);
        const lastSeq = Number(seqRow.rows[0]?.last_seq ?? 0);
        const fresh = items.filter((item) => item.seq > lastSeq);
        if (fresh.length === 0) return { status: 'applied', lastSeq, appended: 0, head };
        if (fresh.some((item, i) => item.seq !== lastSeq + 1 + i)) return { status: 'gap', lastSeq };
        const positions: number[] = [];
        const sessions: string[] = [];
        const ops: (string | null)[] = [];
        const boards: (Buffer | null)[] = [];
        const boardSessions = new Set<string>();
        for (const item of fresh) {
          positions.push(++head);
          if ('op' in item) {
            sessions.push(item.op.sessionId);
            ops.push(JSON.stringify(item.op));
            boards.push(null);
          } else {
            sessions.push(item.board.sessionId);
            ops.push(null);
            const bytes = item.board.update;
            boards.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
            boardSessions.add(item.board.sessionId);
          }
        }
        const newSeq = fresh[fresh.length - 1]!.seq;
        // One statement for the whole push (unnest turns the parallel arrays into rows), the head
        // and the client's seq.
        await client.query(
          `WITH items AS (
             INSERT INTO tabula_items (user_id, position, client_id, session_id, op, board)
             SELECT $1, p, $2, s, o, b FROM unnest($3::bigint[], $4::text[], $5::text[], $6::bytea[]) AS t(p, s, o, b)),
           heads AS (UPDATE tabula_heads SET head = $7 WHERE user_id = $1),
           clients AS (
             INSERT INTO tabula_clients (user_id, client_id, last_seq) VALUES ($1, $2, $8)
             ON CONFLICT (user_id, client_id) DO UPDATE SET last_seq = excluded.last_seq)
           SELECT 1`,
          [userId, clientId, positions, sessions, ops, boards, head, newSeq],
        );
        // Compaction reads the rows just written, so it needs a statement of its own after them.
        for (const sessionId of boardSessions) await compact(client, userId, sessionId);
        return { status: 'applied', lastSeq: newSeq, appended: fresh.length, head };
      }, (client, result) => notify(client, userId, result));
    },
    async pull(userId, after, limit): Promise<StorePullPage> {
      await open();
      const result = await pool.query<ItemRow>(
        'SELECT position, client_id, session_id, op, board FROM tabula_items WHERE user_id = $1 AND position > $2 ORDER BY position LIMIT $3',
        [userId, after, limit + 1],
      );
      const items: StorePulledItem[] = result.rows.slice(0, limit).map((row) => toItem(row, userId));
      return { items, more: result.rows.length > limit };
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
      const client = listener;
      listener = undefined;
      client?.release(true);
      if (ownsPool) await pool.end();
    },
  };
}

function toItem(row: ItemRow, userId: string): StorePulledItem {
  const position = Number(row.position);
  if (row.op !== null) return { position, clientId: row.client_id, opJson: row.op };
  if (row.board === null) throw new TabulaError('storage/failed', `Item ${position} of user ${userId} holds neither an op nor a board update.`);
  return { position, clientId: row.client_id, board: { sessionId: row.session_id, update: new Uint8Array(row.board) } };
}
