/**
 * A pull page is built as text from what the store wrote (the op's JSON,
 * the board bytes), never parsed and serialised again. These properties
 * pin that down through `server.fetch` on both stores: every page is,
 * byte for byte, the envelope around the JSON of the validated items that
 * were pushed, in commit order from any cursor, with `more` false only at
 * the end, cut short by the server's `maxPullBytes` (after the first item,
 * never past it); and it passes the protocol's own `PullResponseSchema`. Item
 * texts, session ids and board sizes are random (quotes, backslashes,
 * braces, lone surrogates, line separators, updates long enough that
 * base64 would wrap), so an escaping or splicing bug in either store's
 * query shows up. Seeded: `TABULA_SEED=n` replays a run.
 */
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { parseOp, type Op } from '../../src/core/index.js';
import { createSyncServer, postgresStore, sqliteStore, type ServerStore } from '../../src/server/index.js';
import { DEFAULT_SYNC_LIMITS, PullResponseSchema } from '../../src/sync/index.js';
import { fcParams } from '../unit/seed.js';
import { SECRET, boardWriter, noteOp, tokenFor, uniqueUser } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-pull-page-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Strings that break naive splicing or escaping, mixed with arbitrary ones.
const nasty = fc.constantFrom('"', '\\', '","op":{', '}]}', '\u2028\u2029', '\ud800', '\u0000', 'é漢字🙂', '\n\t\r', '</script>');
const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), nasty, fc.array(nasty, { maxLength: 4 }).map((parts) => parts.join('')));
// PostgreSQL text cannot hold U+0000, and session ids are stored as text, not JSON: kept out of ids.
const sessionId = fc.oneof(fc.constantFrom('s1', 'a "quoted" session', 'back\\slash', 'ünï'), fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !s.includes('\u0000')));
const item = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('op' as const), sessionId, text }) },
  // Short values and long ones: updates past 57 bytes, where PostgreSQL's base64 would start wrapping lines.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('board' as const), sessionId, value: fc.oneof(fc.string({ maxLength: 8 }), fc.string({ minLength: 60, maxLength: 300 })) }) },
);

type Pushed = { seq: number; op: Op } | { seq: number; board: { sessionId: string; update: string } };

/** The JSON a pull must carry for a pushed item: the validated op, or the board bytes in base64, with the pushing client. */
function wire(clientId: string, pushed: Pushed): string {
  return 'op' in pushed ? JSON.stringify({ clientId, op: parseOp(pushed.op) }) : JSON.stringify({ clientId, board: pushed.board });
}

async function post(server: { fetch(request: Request): Promise<Response> }, endpoint: string, token: string, body: unknown): Promise<{ status: number; text: string }> {
  const response = await server.fetch(
    new Request(`http://tabula.test${endpoint}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  );
  return { status: response.status, text: await response.text() };
}

function pagesProperty(store: ServerStore) {
  return fc.asyncProperty(
    fc.array(item, { minLength: 1, maxLength: 30 }),
    fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 10 }),
    fc.integer({ min: 1, max: 9 }),
    fc.nat(),
    // The server's byte budget per page: the default (never reached here), or one that cuts pages short.
    fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 1_500 })),
    async (specs, batchSizes, limit, startAt, maxPullBytes) => {
      const server = createSyncServer({ store, auth: { secret: SECRET }, ...(maxPullBytes === undefined ? {} : { limits: { maxPullBytes } }) });
      const userId = uniqueUser('pages');
      const token = await tokenFor(userId);
      const board = boardWriter();
      const pushed: Pushed[] = specs.map((spec, i) =>
        spec.kind === 'op'
          ? { seq: i + 1, op: noteOp(userId, spec.sessionId, i + 1, spec.text) }
          : { seq: i + 1, board: { sessionId: spec.sessionId, update: Buffer.from(board.write(`k${i}`, spec.value)).toString('base64') } },
      );
      // Pushed in batches of random sizes, each answered after its commit.
      for (let from = 0, b = 0; from < pushed.length; b++) {
        const to = Math.min(pushed.length, from + batchSizes[b % batchSizes.length]!);
        const answer = await post(server, '/v1/push', token, { clientId: 'c', items: pushed.slice(from, to) });
        expect(answer).toEqual({ status: 200, text: `{"lastSeq":${to}}` });
        from = to;
      }
      const wires = pushed.map((one) => wire('c', one));
      // Paged from a random cursor to the end: each page is exactly the next items' JSON, at most `limit`
      // of them and, past the first, no more than fit in the byte budget.
      const budget = maxPullBytes ?? DEFAULT_SYNC_LIMITS.maxPullBytes;
      const start = startAt % (pushed.length + 1);
      let cursor: string | null = start === 0 ? null : String(start);
      let at = start;
      for (;;) {
        const page = await post(server, '/v1/pull', token, { cursor, limit });
        let end = at;
        for (let bytes = 0; end < pushed.length && end - at < limit; end++) {
          bytes += Buffer.byteLength(wires[end]!);
          if (end > at && bytes > budget) break;
        }
        const more = end < pushed.length;
        const next = end === at ? cursor : String(end);
        expect(page.status).toBe(200);
        expect(page.text).toBe(`{"items":[${wires.slice(at, end).join(',')}],"cursor":${JSON.stringify(next)},"more":${more}}`);
        expect(PullResponseSchema.safeParse(JSON.parse(page.text)).success).toBe(true);
        at = end;
        cursor = next;
        if (!more) break;
      }
      expect(at).toBe(pushed.length);
    },
  );
}

describe('pull pages are the pushed items’ JSON, byte for byte', () => {
  it('on sqliteStore', async () => {
    const store = sqliteStore(path.join(dir, 'pages.db'));
    await fc.assert(pagesProperty(store), fcParams(60));
    await store.close();
  }, 120_000);

  it('on postgresStore', async () => {
    const store = postgresStore(inject('postgresUrl'));
    await fc.assert(pagesProperty(store), fcParams(25));
    await store.close();
  }, 120_000);
});
