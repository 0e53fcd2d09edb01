/**
 * The sync server over HTTP, called through `server.fetch` (no port): auth
 * failures and auth settings, ownership and isolation, the seq rules,
 * paging, limits, malformed bodies, concurrent clients, and the event
 * stream. SQLite underneath (PostgreSQL where its driver changes what an id
 * means); the store's own guarantees are the contract suite's job. The
 * bounds on event streams and bodies are in bounds.test.ts.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SignJWT, exportJWK } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSyncServer, postgresStore, sqliteStore, type ServerStore, type SyncServer, type SyncServerOptions } from '../../src/server/index.js';
import { ErrorResponseSchema, PokeEventSchema, PullResponseSchema, type PullResponse } from '../../src/sync/index.js';
import { SECRET, boardOf, boardWriter, call, noteOp, sseReader, tokenFor, uniqueUser } from './helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-server-'));
let n = 0;
const open: { store: ServerStore; server: SyncServer }[] = [];

function start(options: Partial<SyncServerOptions> = {}): { store: ServerStore; server: SyncServer } {
  const store = sqliteStore(path.join(dir, `server-${++n}.db`));
  const server = createSyncServer({ store, auth: { secret: SECRET }, ...options });
  open.push({ store, server });
  return { store, server };
}

afterEach(async () => {
  for (const { store, server } of open.splice(0)) {
    await server.close();
    await store.close();
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function notes(userId: string, from: number, to: number, sessionId = 's1') {
  return Array.from({ length: to - from + 1 }, (_, i) => ({ seq: from + i, op: noteOp(userId, sessionId, from + i) }));
}

async function pullAll(server: SyncServer, token: string, limit?: number): Promise<PullResponse['items'][number][]> {
  const items = [];
  let cursor: string | null = null;
  for (;;) {
    const { status, json } = await call(server, '/v1/pull', { cursor, ...(limit === undefined ? {} : { limit }) }, token);
    expect(status).toBe(200);
    const page = PullResponseSchema.parse(json);
    items.push(...page.items);
    cursor = page.cursor;
    if (!page.more) return items;
  }
}

function expectError(result: { status: number; json: unknown }, status: number, code: string): string {
  expect(result.status).toBe(status);
  const body = ErrorResponseSchema.parse(result.json);
  expect(body.error.code).toBe(code);
  return body.error.message;
}

describe('auth', () => {
  const push = async (server: SyncServer, token: string | null) => call(server, '/v1/push', { clientId: 'c', items: notes('alice', 1, 1) }, token);

  it('refuses a missing token, a non-bearer header and a token in the URL', async () => {
    const { server } = start();
    expectError(await push(server, null), 401, 'sync/unauthorized');
    const basic = await server.fetch(new Request('http://t/v1/pull', { method: 'POST', headers: { authorization: 'Basic YTpi' }, body: '{"cursor":null}' }));
    expect(basic.status).toBe(401);
    expect(basic.headers.get('www-authenticate')).toBe('Bearer');
    const inUrl = await server.fetch(new Request(`http://t/v1/events?token=${await tokenFor('alice')}`));
    expect(inUrl.status).toBe(401);
  });

  it('refuses expired, not-yet-valid, wrongly signed, wrong-algorithm, unsigned and subject-less tokens', async () => {
    const { server } = start();
    const now = Math.floor(Date.now() / 1000);
    expect(await push(server, await tokenFor('alice'))).toMatchObject({ status: 200 });
    expect(expectError(await push(server, await tokenFor('alice', { exp: now - 60 })), 401, 'sync/unauthorized')).toMatch(/expired/);
    expectError(await push(server, await tokenFor('alice', { nbf: now + 60 })), 401, 'sync/unauthorized');
    expectError(await push(server, await tokenFor('alice', { secret: 'another-secret-of-enough-length-0123456789' })), 401, 'sync/unauthorized');
    const hs512 = await new SignJWT({ sub: 'alice' }).setProtectedHeader({ alg: 'HS512' }).setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));
    expectError(await push(server, hs512), 401, 'sync/unauthorized');
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'alice', exp: now + 3600 })}.`;
    expectError(await push(server, unsigned), 401, 'sync/unauthorized');
    const noSub = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));
    expect(expectError(await push(server, noSub), 401, 'sync/unauthorized')).toMatch(/sub/);
    expectError(await push(server, 'not.a.jwt'), 401, 'sync/unauthorized');
  });

  it('accepts a verify function and turns its failure into 401', async () => {
    const { server } = start({ auth: { verify: (token) => (token === 'let-me-in' ? 'alice' : Promise.reject(new Error('no'))) } });
    expect((await push(server, 'let-me-in')).status).toBe(200);
    expectError(await push(server, 'nope'), 401, 'sync/unauthorized');
  });

  it('refuses an HS256 secret shorter than 32 bytes', () => {
    expect(() => createSyncServer({ store: sqliteStore(':memory:'), auth: { secret: 'short' } })).toThrow(expect.objectContaining({ code: 'argument/invalid' }));
  });

  it('refuses a guessable secret, string or bytes, saying how to make one; takes random bytes and the tests’ secret', () => {
    const store = sqliteStore(':memory:');
    for (const secret of ['a'.repeat(32), 'password'.repeat(4), new Uint8Array(32).fill(7), new Uint8Array(64).map((_, i) => i % 3)]) {
      expect(() => createSyncServer({ store, auth: { secret } })).toThrow(expect.objectContaining({ code: 'argument/invalid', message: expect.stringMatching(/auth\.secret.*openssl rand -base64 32/) as string }));
    }
    for (const secret of [SECRET, randomBytes(32), randomBytes(32).toString('base64'), randomBytes(32).toString('hex')]) expect(() => createSyncServer({ store, auth: { secret } })).not.toThrow();
  });

  it('refuses a token without `exp`: it would be valid forever', async () => {
    const { server } = start();
    const forever = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alice').sign(new TextEncoder().encode(SECRET));
    expect(expectError(await push(server, forever), 401, 'sync/unauthorized')).toMatch(/`exp`/);
    const events = await server.fetch(new Request('http://t/v1/events', { headers: { authorization: `Bearer ${forever}` } }));
    expect(events.status).toBe(401);
  });

  // PostgreSQL's driver encodes a lone surrogate as U+FFFD: 'X\uD800' and 'X\uFFFD' would be one user there.
  it('refuses a `sub` that cannot be a user id (lone surrogate, NUL, over 256 characters) with 401 saying why, in every auth mode', async () => {
    const { server } = start();
    const cases: [string, RegExp][] = [
      [`${uniqueUser()}\ud800`, /sub.*lone UTF-16 surrogate/],
      [`\udc00${uniqueUser()}`, /sub.*lone UTF-16 surrogate/],
      [`${uniqueUser()}\u0000`, /sub.*NUL/],
      ['x'.repeat(257), /sub.*1–256 characters/],
    ];
    for (const [sub, why] of cases) expect(expectError(await push(server, await tokenFor(sub)), 401, 'sync/unauthorized')).toMatch(why);
    // The character the driver would have made of the surrogate is a user id like any other.
    const replaced = uniqueUser('X\ufffd');
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(replaced, 1, 1) }, await tokenFor(replaced))).status).toBe(200);
    // A header carries no surrogate or NUL: the token names the id the function returns.
    const ids = ['a\ud800', 'a\u0000', '', 'x'.repeat(257)];
    const { server: custom } = start({ auth: { verify: (token) => (token.startsWith('object-') ? { userId: ids[Number(token.slice(7))]! } : ids[Number(token)]!) } });
    for (const i of ids.keys()) {
      expect(expectError(await push(custom, String(i)), 401, 'sync/unauthorized')).toMatch(/verify function returned cannot be a user id/);
      expect(expectError(await push(custom, `object-${i}`), 401, 'sync/unauthorized')).toMatch(/`userId` the verify function returned cannot be a user id/);
    }
    const events = await custom.fetch(new Request('http://t/v1/events', { headers: { authorization: 'Bearer 1' } }));
    expect(events.status).toBe(401);
  });

  it('on PostgreSQL, keeps the log of X\uFFFD from a token whose `sub` is X\uD800', async () => {
    const store = postgresStore(inject('postgresUrl'));
    const server = createSyncServer({ store, auth: { secret: SECRET } });
    open.push({ store, server });
    const base = uniqueUser('X');
    const owner = `${base}\ufffd`;
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(owner, 1, 1) }, await tokenFor(owner))).json).toEqual({ lastSeq: 1 });
    const lone = await tokenFor(`${base}\ud800`);
    expectError(await call(server, '/v1/pull', { cursor: null }, lone), 401, 'sync/unauthorized');
    expectError(await call(server, '/v1/push', { clientId: 'c', items: notes(owner, 2, 2) }, lone), 401, 'sync/unauthorized');
    expect(await pullAll(server, await tokenFor(owner))).toHaveLength(1);
  });

  describe('JWKS', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    let jwks: Server;
    let jwksUrl = '';
    beforeAll(async () => {
      const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
      jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
      await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
      jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    });
    afterAll(() => new Promise<void>((resolve) => jwks.close(() => resolve())));

    const sign = (claims: { iss?: string; aud?: string }) =>
      new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setSubject('alice').setExpirationTime('1h').sign(privateKey);

    it('requires an audience, at the type and at runtime: a provider signs every app’s tokens with the same keys', () => {
      const store = sqliteStore(':memory:');
      // @ts-expect-error audience is required with jwksUrl
      expect(() => createSyncServer({ store, auth: { jwksUrl } })).toThrow(expect.objectContaining({ code: 'argument/invalid', message: expect.stringContaining('auth.audience') as string }));
      expect(() => createSyncServer({ store, auth: { jwksUrl, audience: '' } })).toThrow(expect.objectContaining({ code: 'argument/invalid', message: expect.stringContaining('auth.audience') as string }));
    });

    it('refuses a provider’s token without `exp`', async () => {
      const { server } = start({ auth: { jwksUrl, audience: 'tabula' } });
      const forever = await new SignJWT({ aud: 'tabula' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setSubject('alice').sign(privateKey);
      expect(expectError(await push(server, forever), 401, 'sync/unauthorized')).toMatch(/`exp`/);
      expect((await push(server, await sign({ aud: 'tabula' }))).status).toBe(200);
    });

    it('verifies with the provider’s keys and checks issuer and audience', async () => {
      const { server } = start({ auth: { jwksUrl, issuer: 'https://id.example', audience: 'tabula' } });
      expect((await push(server, await sign({ iss: 'https://id.example', aud: 'tabula' }))).status).toBe(200);
      expect(expectError(await push(server, await sign({ iss: 'https://evil.example', aud: 'tabula' })), 401, 'sync/unauthorized')).toMatch(/iss/);
      expectError(await push(server, await sign({ iss: 'https://id.example', aud: 'other' })), 401, 'sync/unauthorized');
      // An HS256 token made with some secret must not pass a JWKS-configured server.
      expectError(await push(server, await tokenFor('alice')), 401, 'sync/unauthorized');
    });
  });
});

describe('ownership and isolation', () => {
  it('gives each user only their own items, on the same session id and client id', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const bob = uniqueUser('bob');
    const [ta, tb] = [await tokenFor(alice), await tokenFor(bob)];
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(alice, 1, 3, 'shared') }, ta)).json).toEqual({ lastSeq: 3 });
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(bob, 1, 2, 'shared') }, tb)).json).toEqual({ lastSeq: 2 });
    const alices = await pullAll(server, ta);
    const bobs = await pullAll(server, tb);
    expect(alices.map((item) => ('op' in item ? item.op.userId : ''))).toEqual([alice, alice, alice]);
    expect(bobs.map((item) => ('op' in item ? item.op.userId : ''))).toEqual([bob, bob]);
    expect(JSON.stringify(bobs)).not.toContain(alice);
  });

  it('refuses a whole push naming another user with 403, stores none of it, and does not echo the other user', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const bob = uniqueUser('bob');
    const tb = await tokenFor(bob);
    const items = [...notes(bob, 1, 2), { seq: 3, op: noteOp(alice, 'shared', 3, 'secret of alice') }];
    const refused = await call(server, '/v1/push', { clientId: 'c', items }, tb);
    const message = expectError(refused, 403, 'sync/forbidden');
    expect(message).toContain('items[2].op.userId');
    expect(JSON.stringify(refused.json)).not.toContain(alice);
    expect(await pullAll(server, tb)).toEqual([]);
    expect(await pullAll(server, await tokenFor(alice))).toEqual([]);
    // Bob's seq did not move: his seq 1 is still new.
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(bob, 1, 1) }, tb)).json).toEqual({ lastSeq: 1 });
  });
});

describe('push sequencing', () => {
  it('ignores a duplicate push, refuses a gap with 409 and the server’s lastSeq, and resumes after it', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const first = notes(alice, 1, 3);
    expect((await call(server, '/v1/push', { clientId: 'c', items: first }, token)).json).toEqual({ lastSeq: 3 });
    expect((await call(server, '/v1/push', { clientId: 'c', items: first }, token)).json).toEqual({ lastSeq: 3 });
    const gap = await call(server, '/v1/push', { clientId: 'c', items: notes(alice, 5, 6) }, token);
    expect(expectError(gap, 409, 'sync/gap')).toMatch(/push from seq 4/);
    expect(gap.json).toMatchObject({ error: { lastSeq: 3 } });
    expect(await pullAll(server, token)).toHaveLength(3);
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(alice, 4, 6) }, token)).json).toEqual({ lastSeq: 6 });
    expect(await pullAll(server, token)).toHaveLength(6);
  });

  it('applies a push whose items arrive out of order in seq order, and a later batch that arrived first after a retry', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const items = notes(alice, 1, 5);
    expectError(await call(server, '/v1/push', { clientId: 'c', items: items.slice(3) }, token), 409, 'sync/gap');
    const shuffled = [items[2], items[0], items[1]];
    expect((await call(server, '/v1/push', { clientId: 'c', items: shuffled }, token)).json).toEqual({ lastSeq: 3 });
    expect((await call(server, '/v1/push', { clientId: 'c', items: items.slice(3) }, token)).json).toEqual({ lastSeq: 5 });
    const pulled = await pullAll(server, token);
    expect(pulled.map((item) => ('op' in item ? item.op.id : ''))).toEqual(items.map((item) => item.op.id));
  });

  it('refuses a push holding one seq twice', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const [one] = notes(alice, 1, 1);
    expect(expectError(await call(server, '/v1/push', { clientId: 'c', items: [one, { ...one, op: noteOp(alice, 's', 2) }] }, await tokenFor(alice)), 400, 'schema/invalid')).toMatch(/seq 1 twice/);
  });

  it('refuses a board naming a session life no delete began with 400 naming the item as sent, and stores nothing', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const update = Buffer.from(boardWriter().write('k', 'v')).toString('base64');
    const forged = { seq: 1, board: { sessionId: 's1', update, after: '999999999999999.ffffff.z' } };
    // Sent out of seq order: the message names the item where the request has it.
    const refused = await call(server, '/v1/push', { clientId: 'c', items: [notes(alice, 2, 2)[0], forged] }, token);
    expect(expectError(refused, 400, 'schema/invalid')).toMatch(/^items\[1\]\.board\.after .*no op of this user began.*Nothing of this push was stored/);
    expect(await pullAll(server, token)).toEqual([]);
    expect((await call(server, '/v1/push', { clientId: 'c', items: notes(alice, 1, 2) }, token)).json).toEqual({ lastSeq: 2 });
  });

  it('lands concurrent pushes from two clients of one user, each exactly once', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const client = async (clientId: string) => {
      for (let i = 0; i < 10; i++) {
        const batch = Array.from({ length: 10 }, (_, j) => ({ seq: i * 10 + j + 1, op: noteOp(alice, clientId, i * 10 + j + 1) }));
        expect((await call(server, '/v1/push', { clientId, items: batch }, token)).json).toEqual({ lastSeq: (i + 1) * 10 });
      }
    };
    await Promise.all([client('phone'), client('laptop')]);
    const pulled = await pullAll(server, token);
    expect(pulled).toHaveLength(200);
    expect(new Set(pulled.map((item) => ('op' in item ? item.op.id : ''))).size).toBe(200);
    expect(pulled.filter((item) => item.clientId === 'phone')).toHaveLength(100);
  });
});

describe('pull', () => {
  it('pages in commit order with `more`, keeps the cursor when nothing is new, and caps the page at maxPullItems', async () => {
    const { server } = start({ limits: { maxPullItems: 8 } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const items = notes(alice, 1, 30);
    await call(server, '/v1/push', { clientId: 'c', items }, token);
    const first = PullResponseSchema.parse((await call(server, '/v1/pull', { cursor: null, limit: 1000 }, token)).json);
    expect(first.items).toHaveLength(8);
    expect(first.more).toBe(true);
    const all = await pullAll(server, token, 7);
    expect(all.map((item) => ('op' in item ? item.op.id : ''))).toEqual(items.map((item) => item.op.id));
    const end = PullResponseSchema.parse((await call(server, '/v1/pull', { cursor: first.cursor, limit: 100 }, token)).json);
    const last = PullResponseSchema.parse((await call(server, '/v1/pull', { cursor: '30' }, token)).json);
    expect(end.more).toBe(true);
    expect(last).toEqual({ items: [], cursor: '30', more: false });
    expect(PullResponseSchema.parse((await call(server, '/v1/pull', { cursor: null }, await tokenFor(uniqueUser()))).json)).toEqual({ items: [], cursor: null, more: false });
  });

  it('round-trips a board update as base64 that rebuilds the same board', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const board = boardWriter();
    const updates = [board.write('plan', 'a'), board.write('owner', 'alice')];
    const items = updates.map((update, i) => ({ seq: i + 1, board: { sessionId: 's1', update: Buffer.from(update).toString('base64') } }));
    expect((await call(server, '/v1/push', { clientId: 'c', items }, token)).json).toEqual({ lastSeq: 2 });
    const pulled = await pullAll(server, token);
    expect(boardOf(pulled.map((item) => ('board' in item ? new Uint8Array(Buffer.from(item.board.update, 'base64')) : new Uint8Array())))).toEqual({ plan: 'a', owner: 'alice' });
  });
});

describe('bad input changes nothing', () => {
  async function refusedAndEmpty(server: SyncServer, token: string, body: unknown, status: number, code: string): Promise<string> {
    const message = expectError(await call(server, '/v1/push', body, token), status, code);
    expect(await pullAll(server, token)).toEqual([]);
    return message;
  }

  it('answers 400 naming the field for bad JSON, bad shapes and bad ops', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    expect(await refusedAndEmpty(server, token, '{"clientId":', 400, 'schema/invalid')).toMatch(/not JSON/);
    expect(await refusedAndEmpty(server, token, { items: notes(alice, 1, 1) }, 400, 'schema/invalid')).toMatch(/clientId/);
    const longNote = { seq: 1, op: noteOp(alice, 's', 1, 'x'.repeat(501)) };
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: [...notes(alice, 1, 1), { ...longNote, seq: 2 }] }, 400, 'schema/invalid')).toMatch(/items\[1\]\.op\.body\.text/);
    const both = { seq: 1, op: noteOp(alice, 's', 1), board: { sessionId: 's', update: 'AAA=' } };
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: [both] }, 400, 'schema/invalid')).toMatch(/items\[0\]/);
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: [{ seq: 0, op: noteOp(alice, 's', 1) }] }, 400, 'schema/invalid')).toMatch(/items\[0\]\.seq/);
    expect(expectError(await call(server, '/v1/pull', { cursor: 'abc' }, token), 400, 'schema/invalid')).toMatch(/cursor/);
    // NUL in an id: PostgreSQL text cannot hold it, so every store refuses it up front.
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: [{ seq: 1, op: noteOp(alice, 's\u0000x', 1) }] }, 400, 'schema/invalid')).toMatch(/items\[0\]\.op\.sessionId/);
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: [{ seq: 1, board: { sessionId: 's\u0000x', update: 'AAA=' } }] }, 400, 'schema/invalid')).toMatch(/items\[0\]\.board\.sessionId/);
  });

  it('answers 400 for a board update that is not base64 or not a Yjs update', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const board = (update: string) => ({ clientId: 'c', items: [{ seq: 1, board: { sessionId: 's', update } }] });
    expect(await refusedAndEmpty(server, token, board('not base64!'), 400, 'schema/invalid')).toMatch(/items\[0\]\.board\.update/);
    const garbage = Buffer.from('definitely not a yjs update').toString('base64');
    expect(await refusedAndEmpty(server, token, board(garbage), 400, 'schema/invalid')).toMatch(/items\[0\]\.board\.update is not a Yjs update/);
  });

  it('answers 413 for a body over maxBodyBytes (declared or streamed), too many items, or an oversized board update', async () => {
    const { server } = start({ limits: { maxBodyBytes: 4096, maxPushItems: 3, maxUpdateBytes: 64 } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: notes(alice, 1, 1), pad: 'x'.repeat(5000) }, 413, 'sync/too-large')).toMatch(/4096-byte/);
    const chunks = [new TextEncoder().encode('{"clientId":"c","items":['), new TextEncoder().encode(' '.repeat(5000))];
    const streamed = await server.fetch(
      new Request('http://t/v1/push', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: new ReadableStream({ pull: (controller) => (chunks.length > 0 ? controller.enqueue(chunks.shift()!) : controller.close()) }),
        duplex: 'half',
      } as RequestInit),
    );
    expectError({ status: streamed.status, json: await streamed.json() }, 413, 'sync/too-large');
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: notes(alice, 1, 4) }, 413, 'sync/too-large')).toMatch(/4 items/);
    const board = boardWriter();
    const big = Buffer.from(board.write('k', 'v'.repeat(200))).toString('base64');
    expect(await refusedAndEmpty(server, token, { clientId: 'c', items: [{ seq: 1, board: { sessionId: 's', update: big } }] }, 413, 'sync/too-large')).toMatch(/items\[0\]\.board\.update/);
  });

  it('answers 413 for a body whose Content-Length is over maxBodyBytes, or that is longer than it declares', async () => {
    const { server, store } = start({ limits: { maxBodyBytes: 4096 } });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    const body = (pad: number) => JSON.stringify({ clientId: 'c', items: notes(alice, 1, 1), pad: 'x'.repeat(pad) });
    // Over real HTTP, fetch declares the length: a body within the limit is read, one over it refused.
    const listening = await server.listen({ port: 0 });
    const send = (text: string) => fetch(`${listening.url}/v1/push`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: text });
    const over = await send(body(5000));
    expectError({ status: over.status, json: await over.json() }, 413, 'sync/too-large');
    expect(await store.lastSeq(alice, 'c')).toBe(0);
    // A host that hands over a Request longer than its Content-Length says is caught after the read.
    const lying = await server.fetch(
      new Request('http://t/v1/push', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': '100' }, body: body(5000) }),
    );
    expectError({ status: lying.status, json: await lying.json() }, 413, 'sync/too-large');
    expect(await store.lastSeq(alice, 'c')).toBe(0);
    const within = await send(JSON.stringify({ clientId: 'c', items: notes(alice, 1, 1) }));
    expect(await within.json()).toEqual({ lastSeq: 1 });
  });

  it('answers a CORS preflight from an allowed origin only', async () => {
    const { server } = start({ cors: { origin: ['https://app.example'] } });
    const preflight = (origin: string) =>
      server.fetch(new Request('http://t/v1/push', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' } }));
    const allowed = await preflight('https://app.example');
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(allowed.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
    expect((await preflight('https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
    const { server: closed } = start();
    expect((await closed.fetch(new Request('http://t/v1/health', { headers: { origin: 'https://app.example' } }))).headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers unknown endpoints with a JSON 404', async () => {
    const { server } = start();
    const response = await server.fetch(new Request('http://t/v2/push', { method: 'POST' }));
    expectError({ status: response.status, json: await response.json() }, 404, 'sync/not-found');
    const health = await server.fetch(new Request('http://t/v1/health'));
    expect(await health.json()).toEqual({ ok: true, protocol: 1 });
  });
});

describe('events', () => {
  const events = async (server: SyncServer, token: string) => {
    const response = await server.fetch(new Request('http://t/v1/events', { headers: { authorization: `Bearer ${token}` } }));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    return sseReader(response);
  };

  it('pokes at once with the head, then after each push of the same user only', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const bob = uniqueUser('bob');
    const [ta, tb] = [await tokenFor(alice), await tokenFor(bob)];
    await call(server, '/v1/push', { clientId: 'c', items: notes(alice, 1, 2) }, ta);
    const stream = await events(server, ta);
    expect(await stream.next()).toMatchObject({ event: 'poke', data: expect.stringMatching(/^\{"cursor":"2","time":\d+\}$/) as unknown });
    await call(server, '/v1/push', { clientId: 'c', items: notes(bob, 1, 5) }, tb);
    const third = notes(alice, 3, 3);
    await call(server, '/v1/push', { clientId: 'c', items: third }, ta);
    // Bob's push came first; had it poked alice, the next event would say something else.
    const poke = await stream.next();
    expect(poke.event).toBe('poke');
    // A small push travels in its poke: what a pull from the old head returns, and nothing of bob's.
    const pulled = PullResponseSchema.parse((await call(server, '/v1/pull', { cursor: '2' }, ta)).json);
    expect(PokeEventSchema.parse(JSON.parse(poke.data))).toEqual({ cursor: '3', after: '2', items: pulled.items, time: expect.any(Number) as unknown });
    expect(pulled.items).toEqual([{ clientId: 'c', op: third[0]!.op }]);
    await stream.close();
  });

  it('pokes with a push’s items only when they are few and small, and names the start of the log as after: null', async () => {
    const { server } = start();
    const alice = uniqueUser('alice');
    const ta = await tokenFor(alice);
    const stream = await events(server, ta);
    expect(await stream.next()).toMatchObject({ event: 'poke', data: expect.stringMatching(/^\{"cursor":"0","time":\d+\}$/) as unknown });
    const first = notes(alice, 1, 2);
    await call(server, '/v1/push', { clientId: 'c', items: first }, ta);
    expect(PokeEventSchema.parse(JSON.parse((await stream.next()).data))).toEqual({ cursor: '2', after: null, items: first.map(({ op }) => ({ clientId: 'c', op })), time: expect.any(Number) as unknown });
    await call(server, '/v1/push', { clientId: 'c', items: notes(alice, 3, 102) }, ta);
    expect(await stream.next()).toMatchObject({ event: 'poke', data: expect.stringMatching(/^\{"cursor":"102","time":\d+\}$/) as unknown });
    await stream.close();
  });

  it('releases the subscription of a stream the client cancelled while it was still subscribing', async () => {
    const inner = sqliteStore(path.join(dir, `gated-${++n}.db`));
    let active = 0;
    let subscribed = 0;
    let openGate = (): void => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const store: ServerStore = {
      ...inner,
      async subscribe(userId, onPoke) {
        await gate;
        const off = await inner.subscribe(userId, onPoke);
        active++;
        subscribed++;
        return () => {
          active--;
          off();
        };
      },
    };
    const server = createSyncServer({ store, auth: { secret: SECRET } });
    open.push({ store: inner, server });
    const response = await server.fetch(new Request('http://t/v1/events', { headers: { authorization: `Bearer ${await tokenFor(uniqueUser())}` } }));
    await response.body!.cancel();
    openGate();
    await expect.poll(() => subscribed).toBe(1);
    await expect.poll(() => active).toBe(0);
  });

  it('sends heartbeat comments and ends every stream on close()', async () => {
    const { server } = start({ heartbeatMs: 10 });
    const token = await tokenFor(uniqueUser());
    const response = await server.fetch(new Request('http://t/v1/events', { headers: { authorization: `Bearer ${token}` } }));
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    while (!text.includes(': heartbeat\n\n')) text += (await reader.read()).value ?? '';
    await server.close();
    let done = false;
    while (!done) done = (await reader.read()).done;
    expect(done).toBe(true);
  });
});
