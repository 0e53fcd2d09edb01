/**
 * `postgresStore(url | pool)`: the store past one machine. Any number of
 * stateless server instances share one PostgreSQL; a push takes the user's
 * head row lock, so one user's pushes commit one at a time and positions
 * follow commit order on every instance. Pokes travel by `NOTIFY`, sent
 * right after the push commits, to every instance's `LISTEN` connection.
 *
 * This module opens the pool and wires the parts, one job each: the schema
 * and its migration (postgres-schema.ts), created on first use; a push and
 * its board compaction (postgres-push.ts); a page of the log, for pulls and
 * pokes (postgres-pages.ts); the LISTEN connection and the fan-out of pokes
 * to this instance's subscribers (postgres-pokes.ts).
 */
import type * as Pg from 'pg';
import { TabulaError } from '../core/errors.js';
import { createBoardCompactor } from './board.js';
import { loadDriver } from './driver.js';
import { EMPTY_PAGE, PAGE_BOUNDED, PAGE_EXACT, pageOf, pageRows } from './postgres-pages.js';
import { createPokeHub } from './postgres-pokes.js';
import { createPush } from './postgres-push.js';
import { migrateSchema } from './postgres-schema.js';
import { pageBudget, type ServerStore, type StoreOptions, type StorePullPage, type StorePushItem } from './store.js';

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
  const pokes = createPokeHub(pool, reconnectMs);
  const push = createPush(pool, { compactAfter, compactor });
  let closed = false;

  let ready: Promise<void> | undefined;
  let epochValue: Promise<string> | undefined;
  const open = (): Promise<void> => {
    if (closed) return Promise.reject(new TabulaError('storage/closed', 'This postgresStore is closed; create a new one.'));
    ready ??= migrateSchema(pool).then(() => pokes.listen());
    return ready;
  };

  return {
    async push(userId, clientId, items: readonly StorePushItem[]) {
      await open();
      const result = await push(userId, clientId, items);
      if (result.status === 'applied' && result.appended > 0) pokes.notify(userId, result.head, result.head - result.appended);
      return result;
    },
    async pull(userId, after, limit, maxBytes): Promise<StorePullPage> {
      await open();
      const values = [userId, after, limit, pageBudget(maxBytes)];
      return pageOf(userId, await pageRows(pool, PAGE_BOUNDED, values), 0) ?? pageOf(userId, await pageRows(pool, PAGE_EXACT, values), 0) ?? EMPTY_PAGE;
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
      return pokes.subscribe(userId, onPoke);
    },
    async close() {
      if (closed) return;
      closed = true;
      await pokes.close(ready);
      if (ownsPool) await pool.end();
    },
  };
}
