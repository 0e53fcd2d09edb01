/**
 * A seeded hostile-input fuzz of the sync server's HTTP surface, on both
 * stores: random valid and mutated pushes (ops and board updates), pulls with
 * hostile cursors and limits, event streams opened and dropped (GET and HEAD),
 * forged or confused tokens, from two users and a third whose id differs from
 * one of them only in a replaced character. After every request:
 * - no 5xx, and an answer (a hang fails the run; the guard is a hang
 *   detector, not a timing assertion);
 * - what the server acknowledged is exactly what it stores: each user's
 *   pulled ops equal the model of acknowledged pushes, item by item, and the
 *   pulled board state equals the acknowledged updates applied in order;
 * - nothing of one user reaches another (the model check covers items, a
 *   marker search covers every response body);
 * - `/v1/health` still answers.
 * Replay a failure with the seed it prints: `TABULA_SEED=<seed> npx vitest run --project server test/server/http-fuzz.test.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import * as Y from 'yjs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { makeOp, type Op } from '../../src/core/index.js';
import { plainEqual } from '../../src/core/json.js';
import { createSyncServer, postgresStore, sqliteStore, type ServerStore, type SyncServer } from '../../src/server/index.js';
import { PokeEventSchema, PullResponseSchema } from '../../src/sync/protocol.js';
import { fcParams } from '../unit/seed.js';
import { SECRET, orderKey, sseReader, tokenFor, uniqueUser } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-http-fuzz-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A request that has not been answered by then hangs (a correct server answers these in milliseconds). */
const HANG_MS = 20_000;
const RUNS = 10;
const STEPS = 50;

const HOSTILE_TEXT = ['\u0000', '\ud800', '\udfff', '\ufffd', '__proto__', '\u2028', '"}', '\\', '💥'];
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.array(fc.constantFrom(...HOSTILE_TEXT), { maxLength: 4 }).map((parts) => parts.join('')),
);

type Who = 'alice' | 'bob' | 'twin';
type OpSpec = { kind: 'note' | 'memory' | 'state' | 'message'; session: number; text: string; key: string };
type Step =
  | { type: 'push'; who: Who; client: 0 | 1; ops: OpSpec[]; boards: { session: number; key: string; text: string }[]; seqs: 'next' | 'retry' | 'gap' }
  | { type: 'mutated-push'; who: Who; client: 0 | 1; ops: OpSpec[]; mutations: { at: number; action: 'flip' | 'cut' | 'insert'; text: string }[] }
  | { type: 'hostile-board'; who: Who; session: number; variant: number; flips: number[]; extra: number[]; after: string | undefined }
  | { type: 'pull'; who: Who; cursor: 'own' | 'null' | 'hostile'; hostile: unknown; limit: unknown }
  | { type: 'events'; who: Who; method: 'GET' | 'HEAD'; read: boolean }
  | { type: 'bad-token'; variant: number; path: '/v1/push' | '/v1/pull' | '/v1/events' };

const who = fc.constantFrom<Who>('alice', 'bob', 'twin');
const opSpec: fc.Arbitrary<OpSpec> = fc.record({
  kind: fc.constantFrom('note' as const, 'memory' as const, 'state' as const, 'message' as const),
  session: fc.nat(2),
  text: hostileString,
  key: fc.oneof(fc.constantFrom('k', 'plan', '__proto__', 'constructor'), fc.string({ minLength: 1, maxLength: 5 })),
});
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ type: fc.constant('push' as const), who, client: fc.constantFrom(0 as const, 1 as const), ops: fc.array(opSpec, { maxLength: 4 }), boards: fc.array(fc.record({ session: fc.nat(2), key: fc.constantFrom('a', 'b', 'c'), text: hostileString }), { maxLength: 2 }), seqs: fc.constantFrom('next' as const, 'next' as const, 'retry' as const, 'gap' as const) }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('mutated-push' as const), who, client: fc.constantFrom(0 as const, 1 as const), ops: fc.array(opSpec, { minLength: 1, maxLength: 3 }), mutations: fc.array(fc.record({ at: fc.nat(), action: fc.constantFrom('flip' as const, 'cut' as const, 'insert' as const), text: fc.oneof(fc.constantFrom('"__proto__":1,', '\\u0000', '\\ud800', '{', ']', '1e999', '-1', '"seq":0,', '"after":"999999999999999.999999.zz",'), hostileString) }), { minLength: 1, maxLength: 3 }) }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('hostile-board' as const), who, session: fc.nat(2), variant: fc.nat(), flips: fc.array(fc.nat(), { maxLength: 3 }), extra: fc.array(fc.nat(255), { maxLength: 3 }), after: fc.constantFrom<string | undefined>('', '', undefined, '999999999999999.ffffff.zz', orderKey(1)) }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('pull' as const), who, cursor: fc.constantFrom('own' as const, 'null' as const, 'hostile' as const), hostile: fc.oneof(fc.constantFrom('-1', '1e3', '999999999999999', '9007199254740993', '0x10', ' 1', ''), fc.jsonValue({ maxDepth: 1 })), limit: fc.oneof(fc.constant(undefined), fc.integer({ min: -5, max: 5000 }), fc.constantFrom(1.5, '10', null, 1e300)) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('events' as const), who, method: fc.constantFrom('GET' as const, 'HEAD' as const), read: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('bad-token' as const), variant: fc.nat(), path: fc.constantFrom('/v1/push' as const, '/v1/pull' as const, '/v1/events' as const) }) },
);

/** Board updates no server may store (they hang or blow up Yjs, or hold what a board cannot), and one valid one. */
function hostileBoards(): Uint8Array[] {
  const text = new Y.Doc();
  text.getMap('blackboard').set('notes', new Y.Text('not JSON'));
  const sub = new Y.Doc();
  sub.getMap('blackboard').set('doc', new Y.Doc());
  const good = new Y.Doc();
  good.getMap('blackboard').set('k', 'v');
  const withTrailing = Y.encodeStateAsUpdate(good);
  const valid = new Y.Doc();
  valid.getMap('blackboard').set('fine', 'HOSTILEOK');
  return [
    // A valid update, so the life it names is what decides.
    Y.encodeStateAsUpdate(valid),
    Y.encodeStateAsUpdate(text),
    Y.encodeStateAsUpdate(sub),
    Uint8Array.from([...withTrailing, 0, 1, 2]),
    // The 14 bytes that made Y.mergeUpdates loop for ever: a GC of length 0 of client 1 at clock 2^53 + 2.
    Uint8Array.from([1, 1, 1, 130, 128, 128, 128, 128, 128, 128, 16, 0, 0, 0]),
    withTrailing.slice(0, withTrailing.length - 2),
  ];
}

interface Fixture {
  readonly store: ServerStore;
  readonly server: SyncServer;
}

async function run(fixture: Fixture, steps: readonly Step[]): Promise<void> {
  const { server } = fixture;
  const alice = uniqueUser('alice');
  const users: Record<Who, string> = { alice, bob: uniqueUser('bob'), twin: `${alice}\ufffd` };
  const markers: Record<Who, string> = { alice: 'ALICEMARK', bob: 'BOBMARK', twin: 'TWINMARK' };
  const tokens = Object.fromEntries(await Promise.all((Object.keys(users) as Who[]).map(async (w) => [w, await tokenFor(users[w])]))) as Record<Who, string>;
  const badTokens = [
    'garbage',
    await tokenFor(users.bob, { secret: 'another-secret-0123456789-abcdefghij' }),
    await tokenFor(users.alice, { exp: Math.floor(Date.now() / 1000) - 60 }),
    await tokenFor(`${alice}\ud800`),
    await tokenFor(`${alice}\u0000`),
    await tokenFor(''),
    `${tokens.alice}x`,
  ];
  // The model: what each user's log must hold, from acknowledged pushes only.
  const model = {
    ops: { alice: [], bob: [], twin: [] } as Record<Who, { clientId: string; op: unknown }[]>,
    boards: { alice: new Map(), bob: new Map(), twin: new Map() } as Record<Who, Map<string, Y.Doc>>,
    lastSeq: { alice: [0, 0], bob: [0, 0], twin: [0, 0] } as Record<Who, number[]>,
    cursor: { alice: null, bob: null, twin: null } as Record<Who, string | null>,
  };
  const writers = new Map<string, Y.Doc>();
  let opCount = 0;
  let accepted = 0;

  const request = async (method: string, route: string, token: string | null, body?: string): Promise<Response> => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hang = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${method} ${route} was not answered: the server hangs`)), HANG_MS);
    });
    try {
      return await Promise.race([server.fetch(new Request(`http://tabula.test${route}`, { method, headers, ...(body === undefined ? {} : { body }) })), hang]);
    } finally {
      clearTimeout(timer);
    }
  };
  /** The body text of an answer that must not be a 5xx and must hold nothing of another user. */
  const answered = async (response: Response, asker: Who | null): Promise<string> => {
    const text = method(response) === 'stream' ? '' : await response.text();
    expect(response.status, `status ${response.status}: ${text.slice(0, 300)}`).toBeLessThan(500);
    for (const other of Object.keys(markers) as Who[]) {
      if (other !== asker) expect(text.includes(markers[other]), `a response to ${asker ?? 'a bad token'} holds ${other}'s data`).toBe(false);
    }
    return text;
  };
  const method = (response: Response): 'stream' | 'json' => (response.headers.get('content-type')?.startsWith('text/event-stream') ? 'stream' : 'json');

  const opOf = (w: Who, spec: OpSpec): Op => {
    const n = ++opCount;
    const base = { id: `${markers[w]}-op-${n}`, userId: users[w], sessionId: `${w}-s${spec.session}`, order: orderKey(n), after: '' };
    const text = `${markers[w]}${spec.text}`;
    switch (spec.kind) {
      case 'note':
        return makeOp('note.add', { ...base, body: { text: text.slice(0, 500), runId: null, scope: null, at: n } });
      case 'memory':
        return makeOp('memory.set', { ...base, body: { scope: 'user', key: spec.key, value: { text } } });
      case 'state':
        return makeOp('state.save', { ...base, body: { version: n, patch: { context: { [spec.key]: text } } } });
      case 'message':
        return makeOp('message.append', { ...base, body: { id: `${markers[w]}-m${n}`, createdAt: n, status: 'complete', message: { role: 'user', content: text } } });
    }
  };
  const boardUpdate = (w: Who, client: number, session: number, key: string, value: string): Uint8Array => {
    const name = `${w}/${client}/${session}`;
    let doc = writers.get(name);
    if (!doc) writers.set(name, (doc = new Y.Doc()));
    let update: Uint8Array | undefined;
    doc.once('update', (bytes: Uint8Array) => (update = bytes));
    doc.getMap('blackboard').set(key, `${markers[w]}${value}`);
    return update!;
  };
  const base64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

  /** Pulls everything of `w` and checks it against the model. */
  const check = async (w: Who): Promise<void> => {
    const ops: { clientId: string | null; op: unknown }[] = [];
    const boards = new Map<string, Y.Doc>();
    let cursor: string | null = null;
    for (let page = 0; ; page++) {
      expect(page, 'the pull does not end').toBeLessThan(1000);
      const response = await request('POST', '/v1/pull', tokens[w], JSON.stringify({ cursor }));
      const text = await answered(response, w);
      expect(response.status).toBe(200);
      const pulled = PullResponseSchema.parse(JSON.parse(text));
      for (const item of pulled.items) {
        if ('op' in item) {
          expect(item.op.userId).toBe(users[w]);
          ops.push({ clientId: item.clientId, op: item.op });
        } else {
          let doc = boards.get(item.board.sessionId);
          if (!doc) boards.set(item.board.sessionId, (doc = new Y.Doc()));
          Y.applyUpdate(doc, new Uint8Array(Buffer.from(item.board.update, 'base64')));
        }
      }
      cursor = pulled.cursor;
      if (!pulled.more) break;
    }
    model.cursor[w] = cursor;
    expect(ops.length, `${w}'s log holds ${ops.length} ops, ${model.ops[w].length} were acknowledged`).toBe(model.ops[w].length);
    ops.forEach((item, i) => {
      const expected = model.ops[w][i]!;
      expect(item.clientId).toBe(expected.clientId);
      expect(plainEqual(item.op, expected.op), `op ${i} of ${w} differs from what was acknowledged`).toBe(true);
    });
    const sessions = new Set([...boards.keys(), ...model.boards[w].keys()]);
    for (const session of sessions) {
      expect(boards.get(session)?.getMap('blackboard').toJSON() ?? {}, `board ${session}`).toEqual(model.boards[w].get(session)?.getMap('blackboard').toJSON() ?? {});
    }
  };

  const push = async (w: Who, client: number, items: { seq: number; op?: Op; board?: { sessionId: string; update: string; after?: string } }[], raw?: string): Promise<{ status: number; text: string }> => {
    const body = raw ?? JSON.stringify({ clientId: `c${client}`, items });
    const response = await request('POST', '/v1/push', tokens[w], body);
    const text = await answered(response, w);
    return { status: response.status, text };
  };
  /** Records an acknowledged push in the model. */
  const acknowledge = (w: Who, client: number, items: { seq: number; op?: Op; board?: { sessionId: string; update: Uint8Array } }[], lastSeq: number): void => {
    const fresh = items.filter((item) => item.seq > model.lastSeq[w][client]!).sort((a, b) => a.seq - b.seq);
    for (const item of fresh) {
      if (item.op) model.ops[w].push({ clientId: `c${client}`, op: JSON.parse(JSON.stringify(item.op)) });
      if (item.board) {
        let doc = model.boards[w].get(item.board.sessionId);
        if (!doc) model.boards[w].set(item.board.sessionId, (doc = new Y.Doc()));
        Y.applyUpdate(doc, item.board.update);
      }
    }
    model.lastSeq[w][client] = Math.max(model.lastSeq[w][client]!, lastSeq);
    accepted++;
  };

  for (const current of steps) {
    switch (current.type) {
      case 'push': {
        const { who: w, client } = current;
        const start = current.seqs === 'next' ? model.lastSeq[w][client]! + 1 : current.seqs === 'retry' ? Math.max(1, model.lastSeq[w][client]!) : model.lastSeq[w][client]! + 2;
        const items: { seq: number; op?: Op; board?: { sessionId: string; update: Uint8Array } }[] = [];
        for (const spec of current.ops) items.push({ seq: start + items.length, op: opOf(w, spec) });
        for (const board of current.boards) items.push({ seq: start + items.length, board: { sessionId: `${w}-s${board.session}`, update: boardUpdate(w, client, board.session, board.key, board.text) } });
        if (items.length === 0) break;
        const wire = items.map((item) => (item.op ? { seq: item.seq, op: item.op } : { seq: item.seq, board: { sessionId: item.board!.sessionId, update: base64(item.board!.update), after: '' } }));
        const { status, text } = await push(w, client, wire);
        if (status === 200) acknowledge(w, client, items, (JSON.parse(text) as { lastSeq: number }).lastSeq);
        const retried = current.seqs === 'retry' && model.lastSeq[w][client]! >= start;
        // A push the generator built valid must be taken (or be a retry or a gap): else the fuzz tests nothing.
        const valid = current.ops.every((spec) => spec.key !== '__proto__' && !/[\ud800-\udfff]/.test(spec.key) && !spec.key.includes('\u0000'));
        if (valid && (current.seqs === 'next' || retried)) expect(status, text).toBe(200);
        if (valid && current.seqs === 'gap' && model.lastSeq[w][client]! + 1 < start) expect(status, text).toBe(409);
        break;
      }
      case 'mutated-push': {
        const { who: w, client } = current;
        const start = model.lastSeq[w][client]! + 1;
        const items = current.ops.map((spec, i) => ({ seq: start + i, op: opOf(w, spec) }));
        let body = JSON.stringify({ clientId: `c${client}`, items });
        for (const { at, action, text } of current.mutations) {
          const i = at % (body.length + 1);
          if (action === 'flip') body = body.slice(0, i) + String.fromCharCode((body.charCodeAt(i) || 32) ^ 1) + body.slice(i + 1);
          else if (action === 'cut') body = body.slice(0, i);
          else body = body.slice(0, i) + text + body.slice(i);
        }
        const { status, text } = await push(w, client, [], body);
        if (status === 200) {
          // Taken: what it held must be what the server now stores. Parse it as the server did.
          const parsed = JSON.parse(body) as { clientId: string; items: { seq: number; op?: Op; board?: { sessionId: string; update: string } }[] };
          const clientNumber = parsed.clientId === 'c0' ? 0 : parsed.clientId === 'c1' ? 1 : -1;
          expect(clientNumber, `a push of client ${parsed.clientId} was taken`).toBeGreaterThanOrEqual(0);
          acknowledge(
            w,
            clientNumber,
            parsed.items.map((item) => (item.board ? { seq: item.seq, board: { sessionId: item.board.sessionId, update: new Uint8Array(Buffer.from(item.board.update, 'base64')) } } : { seq: item.seq, ...(item.op ? { op: item.op } : {}) })),
            (JSON.parse(text) as { lastSeq: number }).lastSeq,
          );
        }
        break;
      }
      case 'hostile-board': {
        const { who: w } = current;
        const all = hostileBoards();
        let bytes = all[current.variant % all.length]!;
        if (current.flips.length > 0 || current.extra.length > 0) {
          bytes = Uint8Array.from([...bytes, ...current.extra]);
          for (const flip of current.flips) bytes[flip % bytes.length]! ^= 1 << flip % 8;
        }
        const seq = model.lastSeq[w][0]! + 1;
        // A life no delete began (far ahead, or just one never begun) must be refused: it would end the real one's board.
        const life = current.after === undefined ? {} : { after: current.after };
        const { status, text } = await push(w, 0, [{ seq, board: { sessionId: `${w}-s${current.session}`, update: base64(bytes), ...life } }]);
        if (status === 200) {
          expect(current.after === undefined || current.after === '', `a board of life ${current.after} that no delete began was taken`).toBe(true);
          // A mutation may leave a valid update: then it must apply as a client applies it.
          const doc = new Y.Doc();
          Y.applyUpdate(doc, bytes);
          for (const value of doc.getMap('blackboard').values()) expect(typeof value === 'object' && value !== null && 'constructor' in value && value instanceof Y.AbstractType).toBe(false);
          acknowledge(w, 0, [{ seq, board: { sessionId: `${w}-s${current.session}`, update: bytes } }], (JSON.parse(text) as { lastSeq: number }).lastSeq);
        } else {
          expect([400, 413]).toContain(status);
        }
        break;
      }
      case 'pull': {
        const { who: w } = current;
        const cursor = current.cursor === 'own' ? model.cursor[w] : current.cursor === 'null' ? null : current.hostile;
        const body = JSON.stringify(current.limit === undefined ? { cursor } : { cursor, limit: current.limit });
        const response = await request('POST', '/v1/pull', tokens[w], body);
        const text = await answered(response, w);
        if (response.status === 200) {
          for (const item of PullResponseSchema.parse(JSON.parse(text)).items) if ('op' in item) expect(item.op.userId).toBe(users[w]);
        }
        break;
      }
      case 'events': {
        const { who: w } = current;
        const response = await request(current.method, '/v1/events', tokens[w]);
        expect(response.status).toBeLessThan(500);
        if (current.method === 'GET' && response.body) {
          const reader = sseReader(response);
          if (current.read) {
            const event = await reader.next();
            expect(event.event).toBe('poke');
            const poke = PokeEventSchema.parse(JSON.parse(event.data));
            for (const item of poke.items ?? []) if ('op' in item) expect(item.op.userId).toBe(users[w]);
          }
          await reader.close();
        } else {
          await response.body?.cancel();
        }
        break;
      }
      case 'bad-token': {
        const token = badTokens[current.variant % badTokens.length]!;
        const response = await request(current.path === '/v1/events' ? 'GET' : 'POST', current.path, token, current.path === '/v1/events' ? undefined : JSON.stringify({ cursor: null }));
        await answered(response, null);
        expect(response.status).toBe(401);
        break;
      }
    }
    for (const w of Object.keys(users) as Who[]) await check(w);
    const health = await request('GET', '/v1/health', null);
    expect(health.status).toBe(200);
    await health.text();
  }
  // A fuzz in which the server took nothing would prove nothing.
  expect(accepted).toBeGreaterThan(0);
}

const stores: { name: string; open: () => ServerStore }[] = [
  { name: 'sqliteStore', open: () => sqliteStore(path.join(dir, `fuzz-${Math.random().toString(36).slice(2)}.db`), { compactBoardAfter: 3 }) },
  { name: 'postgresStore', open: () => postgresStore(inject('postgresUrl'), { compactBoardAfter: 3 }) },
];

describe.each(stores)('hostile HTTP fuzz on $name', ({ open }) => {
  it(`${RUNS} runs of ${STEPS} requests: no 5xx, no hang, acknowledged equals stored, no user sees another's data`, { timeout: 600_000 }, async () => {
    const store = open();
    const server = createSyncServer({ store, auth: { secret: SECRET }, limits: { maxBodyBytes: 64 * 1024, maxPushItems: 50, maxPullItems: 7 } });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: STEPS, maxLength: STEPS }), (steps) => run({ store, server }, steps)),
        fcParams(RUNS, { endOnFailure: true }),
      );
    } finally {
      await server.close();
      await store.close();
    }
  });
});
