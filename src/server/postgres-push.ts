/**
 * A push on PostgreSQL: one call of the schema's push function, which takes
 * the user's head row lock (so one user's pushes commit one at a time and
 * positions follow commit order on every instance, guarantee 3), skips what
 * it already holds by seq and refuses gaps and unknown lives; and, when the
 * push holds board updates, the board compaction in the same transaction
 * (guarantee 6). The poke that follows the commit is the store's to send
 * (postgres-pokes.ts).
 */
import type * as Pg from 'pg';
import { TabulaError } from '../core/errors.js';
import type { BoardCompactor } from './board.js';
import { livesBegunBy, type StorePushItem, type StorePushResult } from './store.js';

/** A call of the schema's push function (postgres-schema.ts): the whole push in one statement. */
const PUSH = 'SELECT out_status, out_last_seq, out_appended, out_head, out_index FROM tabula_push_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)';

interface PushRow {
  out_status: 'applied' | 'gap' | 'unknown-life';
  out_last_seq: string;
  out_appended: string;
  out_head: string;
  out_index: string | null;
}

/** What the push needs of its store: the pool, and when and how boards are compacted (see StoreOptions). */
export interface PushOptions {
  readonly compactAfter: number;
  readonly compactor: BoardCompactor;
}

/** The push of a store over `pool`: stores `items` of `clientId` for `userId` (see ServerStore.push). */
export function createPush(pool: Pg.Pool, { compactAfter, compactor }: PushOptions): (userId: string, clientId: string, items: readonly StorePushItem[]) => Promise<StorePushResult> {
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

  return async (userId, clientId, items) => {
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
    return result;
  };
}

function toPushResult(row: PushRow | undefined): StorePushResult {
  if (row === undefined) throw new TabulaError('storage/failed', 'tabula_push_v3 returned no row.');
  if (row.out_status === 'gap') return { status: 'gap', lastSeq: Number(row.out_last_seq) };
  if (row.out_status === 'unknown-life') return { status: 'unknown-life', index: Number(row.out_index) };
  return { status: 'applied', lastSeq: Number(row.out_last_seq), appended: Number(row.out_appended), head: Number(row.out_head) };
}
