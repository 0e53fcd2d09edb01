/**
 * How the PostgreSQL store reads a page of a user's log, for a pull and for
 * a poke alike: the statements that bound it in count and in bytes
 * (guarantee 8) and build each item's wire JSON inside PostgreSQL, and the
 * page their rows make. The bytes are counted from the rows' lengths before
 * anything is read whole, so a page of large boards detoasts only what it
 * returns. What a page is for (a pull's answer, a poke's items) is the
 * caller's business.
 */
import type * as Pg from 'pg';
import { TabulaError } from '../core/errors.js';
import type { StorePullPage, StorePulledItem } from './store.js';

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
export interface NamedStatement {
  readonly name: string;
  readonly text: string;
}
/**
 * A pull's page: PAGE_BOUNDED, and PAGE_EXACT when the bound does not fit (a statement of its own
 * that needs nothing from the first, so the two share no snapshot). Rows: position, json, total (see
 * pageOf). $1 user, $2 after, $3 limit, $4 maxBytes.
 */
export const PAGE_BOUNDED: NamedStatement = { name: 'tabula_page_bounded_v1', text: `${PAGE_BOUNDED_ROWS} ORDER BY 1` };
export const PAGE_EXACT: NamedStatement = { name: 'tabula_page_exact_v1', text: `${PAGE_EXACT_ROWS} ORDER BY 1` };

/**
 * A poke's read: the user's head and, in the same snapshot, the page after $2 as PAGE_BOUNDED or
 * PAGE_EXACT reads it (the head, then their columns; no rows when the user has no head row).
 */
const pokePage = (rows: string): string => `SELECT h.head, p.position, p.json, p.total FROM tabula_heads h LEFT JOIN LATERAL (${rows}) p ON true WHERE h.user_id = $1 ORDER BY p.position`;
export const POKE_BOUNDED: NamedStatement = { name: 'tabula_poke_bounded_v1', text: pokePage(PAGE_BOUNDED_ROWS) };
export const POKE_EXACT: NamedStatement = { name: 'tabula_poke_exact_v1', text: pokePage(PAGE_EXACT_ROWS) };

/** The rows of a page statement (PAGE_*, POKE_*), as arrays. */
export async function pageRows(pool: Pg.Pool, statement: NamedStatement, values: unknown[]): Promise<PageRow[]> {
  return (await pool.query<PageRow>({ ...statement, values, rowMode: 'array' })).rows;
}

/** A row of a page statement (PAGE_BOUNDED, PAGE_EXACT, or POKE_* with the head first), as text. */
export type PageRow = (string | null)[];

/** A page without items: no candidates (or a limit of 0). */
export const EMPTY_PAGE: StorePullPage = { items: [], more: false };

/**
 * The page in a page statement's rows, their columns from `at` on (position, json, total): the items,
 * then the trailer, with a null position and the candidates' count. Undefined when candidates came back
 * without a single item: PAGE_BOUNDED's bound did not fit, and PAGE_EXACT decides (which returns none
 * only for a limit of 0: then the page is {@link EMPTY_PAGE}, as on SQLite).
 */
export function pageOf(userId: string, rows: readonly PageRow[], at: number): StorePullPage | undefined {
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
