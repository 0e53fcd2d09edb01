/**
 * Pokes across instances: the store's one LISTEN connection and the
 * `NOTIFY` each push sends after it commits, and the fan-out of a
 * notification to this instance's subscribers. A push on any instance
 * reaches the event streams on every instance this way (guarantee 5),
 * through the database and never through process memory.
 *
 * A notification is only a hint: any role that can connect may send one on
 * the channel, so its payload carries no items (only the user and two
 * positions), is parsed defensively and, when it names a user with
 * subscribers here, makes this instance read that user's new items from the
 * tables itself (with the page, when it is small: guarantee 7). Those reads
 * are chained per user and coalesced, so pokes stay in order and a burst
 * costs one read.
 *
 * If the LISTEN connection drops, it is reopened and every subscribed
 * user's log is read again (a notification may have been lost in between).
 */
import type * as Pg from 'pg';
import { ID_MAX_LENGTH, findNameProblem } from '../core/names.js';
import { PokeListeners } from './listeners.js';
import { EMPTY_PAGE, POKE_BOUNDED, POKE_EXACT, pageOf, pageRows } from './postgres-pages.js';
import { POKE_ITEMS_MAX_BYTES, POKE_MAX_ITEMS, pokeItems, type StorePokeItems } from './store.js';

/** The NOTIFY channel of every instance over one database (instances of older versions too). */
const CHANNEL = 'tabula_poke';
/**
 * Longest notification payload read, in UTF-16 code units; longer ones are ignored unparsed. Ours
 * are at most ~1,600 (a 256-unit user id escaped 6 units a unit, and two numbers), far under
 * PostgreSQL's 8,000-byte limit.
 */
const POKE_PAYLOAD_MAX_LENGTH = 2048;
/** At most one log line per this many ms about notifications that were ignored. */
const IGNORED_LOG_INTERVAL_MS = 60_000;

/** The pokes of one postgresStore: see the module comment. */
export interface PokeHub {
  /** Opens the LISTEN connection; called once, after the schema exists. */
  listen(): Promise<void>;
  /** Sends the poke of a committed push of `userId` that moved its head from `after` to `head`; never waits for it, never throws. */
  notify(userId: string, head: number, after: number): void;
  /** Calls `onPoke` for each poke of `userId` this instance hears of; returns the unsubscribe function. */
  subscribe(userId: string, onPoke: (head: number, appended?: StorePokeItems) => void): () => void;
  /**
   * Stops hearing and reading, waits for `opening` (the store's open, which may still be starting the
   * LISTEN connection), for the pokes being sent and the reads running, then releases the connection.
   */
  close(opening: Promise<unknown> | undefined): Promise<void>;
}

/** The poke hub of a store over `pool`; nothing connects before {@link PokeHub.listen}. */
export function createPokeHub(pool: Pg.Pool, reconnectMs: number): PokeHub {
  const listeners = new PokeListeners();
  let listener: Pg.PoolClient | undefined;
  let closed = false;
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined;

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
    let rows = await pageRows(pool, POKE_BOUNDED, values);
    let page = pageOf(userId, rows, 1);
    // The bound did not fit: the exact page, with the head read again in its snapshot.
    if (!page) page = pageOf(userId, (rows = await pageRows(pool, POKE_EXACT, values)), 1) ?? EMPTY_PAGE;
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

  return {
    listen,
    notify,
    subscribe(userId, onPoke) {
      const off = listeners.add(userId, onPoke);
      return () => {
        off();
        // What was read for the user goes with its last subscriber (a running read drops it when done).
        const reader = readers.get(userId);
        if (reader && !reader.running && !listeners.has(userId)) readers.delete(userId);
      };
    },
    async close(opening) {
      closed = true;
      clearTimeout(reconnectTimer);
      listeners.clear();
      await opening?.catch(() => {});
      await Promise.all([...pokesInFlight, ...[...readers.values()].map((reader) => reader.running)]);
      const client = listener;
      listener = undefined;
      client?.release(true);
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
