/**
 * The push and pull endpoints. A push is validated whole before the store
 * sees it: a bad field, a foreign op, an op ordered too far ahead, an
 * oversized or undecodable board update refuses the whole push and stores
 * nothing, and the answer goes out only after the store has committed. A
 * pull's page is answered as text built from the items' stored JSON.
 */
import type { Context } from 'hono';
import { TabulaError } from '../core/errors.js';
import { PullRequestSchema, PushRequestSchema, findDriftedOrder, parseWire, type PushResponse, type SyncLimits } from '../sync/protocol.js';
import { readBody } from './body.js';
import { decodeBoardUpdate } from './board.js';
import { errorBody } from './responses.js';
import type { ServerStore, StorePushItem } from './store.js';

/** What the endpoints need of the server. */
export interface RouteOptions {
  readonly store: ServerStore;
  readonly limits: SyncLimits;
  /** The user of the request's token, checked and not revoked; throws `sync/unauthorized`. */
  readonly userOf: (c: Context) => Promise<string>;
}

/** A route's handler, as Hono calls it. */
export type Route = (c: Context) => Promise<Response>;

/** `POST /v1/push`. */
export function pushRoute({ store, limits, userOf }: RouteOptions): Route {
  const readJson = (request: Request, maxBytes: number): Promise<unknown> => readBody(request, maxBytes, limits.bodyTimeoutMs);
  return async (c) => {
    const userId = await userOf(c);
    const body = await readJson(c.req.raw, limits.maxBodyBytes);
    const count = (body as { items?: unknown } | null)?.items;
    if (Array.isArray(count) && count.length > limits.maxPushItems) {
      throw new TabulaError('sync/too-large', `The push has ${count.length} items, over the limit of ${limits.maxPushItems}; split it.`);
    }
    const push = parseWire(PushRequestSchema, body, 'The push body');
    const items: StorePushItem[] = [];
    const now = Date.now();
    for (const [i, item] of push.items.entries()) {
      if ('op' in item) {
        // Refuse the whole push: storing the rest would leave the client unable to tell what landed.
        if (item.op.userId !== userId) {
          throw new TabulaError('sync/forbidden', `items[${i}].op.userId is not the user of the token; a client pushes only its own user's ops. Nothing of this push was stored.`);
        }
        const drifted = findDriftedOrder(item.op, now, limits.maxDriftMs);
        if (drifted !== null) {
          throw new TabulaError(
            'schema/invalid',
            `items[${i}].op.${drifted} is ordered more than ${limits.maxDriftMs} ms ahead of the server's clock (${new Date(now).toISOString()}): the clock of the device that wrote it runs ahead. Such an op would win every last-writer-wins write until then; it is refused. Nothing of this push was stored.`,
          );
        }
        items.push(item);
      } else {
        const update = decodeBoardUpdate(item.board.update, limits, `items[${i}].board.update`);
        const { sessionId, after } = item.board;
        items.push({ seq: item.seq, board: after === undefined ? { sessionId, update } : { sessionId, update, after } });
      }
    }
    items.sort((a, b) => a.seq - b.seq);
    for (let i = 1; i < items.length; i++) {
      if (items[i]!.seq === items[i - 1]!.seq) throw new TabulaError('schema/invalid', `The push holds seq ${items[i]!.seq} twice; number items 1, 2, 3… per client.`);
    }
    const result = await store.push(userId, push.clientId, items);
    if (result.status === 'unknown-life') {
      // The store names its (sorted) item, a board update; seqs are unique, so the seq finds the request's.
      const refused = items[result.index]!;
      const i = push.items.findIndex((item) => item.seq === refused.seq);
      const life = 'board' in refused ? `${JSON.stringify(refused.board.after)}, a life of session ${JSON.stringify(refused.board.sessionId)}` : 'a life';
      throw new TabulaError(
        'schema/invalid',
        `items[${i}].board.after is ${life} that no op of this user began (a life's after is the order of the session.delete it follows, or '' for a first life); push the delete, or an op written in that life, before its board. Nothing of this push was stored.`,
      );
    }
    if (result.status === 'gap') {
      const first = items.find((item) => item.seq > result.lastSeq)!.seq;
      return c.json(
        errorBody('sync/gap', `The server has seq ${result.lastSeq} of client ${push.clientId}, and this push continues at ${first}; push from seq ${result.lastSeq + 1}.`, {
          lastSeq: result.lastSeq,
        }),
        409,
      );
    }
    return c.json({ lastSeq: result.lastSeq } satisfies PushResponse);
  };
}

/** `POST /v1/pull`. */
export function pullRoute({ store, limits, userOf }: RouteOptions): Route {
  const readJson = (request: Request, maxBytes: number): Promise<unknown> => readBody(request, maxBytes, limits.bodyTimeoutMs);
  return async (c) => {
    const userId = await userOf(c);
    const pull = parseWire(PullRequestSchema, await readJson(c.req.raw, limits.maxBodyBytes), 'The pull body');
    const limit = Math.min(pull.limit ?? limits.maxPullItems, limits.maxPullItems);
    // The byte budget keeps a page of large items from growing past what one answer can hold.
    const after = pull.cursor === null ? 0 : Number(pull.cursor);
    const page = await store.pull(userId, after, limit, limits.maxPullBytes);
    if (page.items.length === 0 && after > 0) {
      // A cursor this store never handed out: its data is not what the client pulled from (restored from
      // an older or an empty volume). An empty answer would leave the client waiting past its own cursor for good.
      const head = await store.head(userId);
      if (after > head) {
        return c.json(
          errorBody('sync/gap', `The pull's cursor ${pull.cursor} is past everything this server holds for the user (position ${head}): its data was reset or restored. Pull from the start (cursor null) and push again what you hold.`, { head }),
          409,
        );
      }
    }
    // Built as text from the items' wire JSON, which the store made from what it validated
    // and stored: nothing of the page is parsed or serialised again.
    const items = page.items.map((item) => item.json).join(',');
    const last = page.items[page.items.length - 1];
    const cursor = last === undefined ? pull.cursor : String(last.position);
    return c.body(`{"items":[${items}],"cursor":${JSON.stringify(cursor)},"more":${page.more}}`, 200, { 'Content-Type': 'application/json' });
  };
}
