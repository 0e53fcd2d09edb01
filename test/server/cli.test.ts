/**
 * The `tabula-server` CLI as a real process: help, refusing to start without
 * a way to check tokens or with flags and secrets it would misread, serving
 * /v1/health and the event stream's bounds, stopping on SIGTERM with event
 * streams open; and two processes on one PostgreSQL, where a push to one
 * pokes a listener on the other.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { DEFAULT_SYNC_LIMITS, ErrorResponseSchema, PokeEventSchema, PullResponseSchema } from '../../src/sync/index.js';
import { noteOp, sseReader, tokenFor, uniqueUser } from './helpers.js';
import { refusal, runCli, startServerProcess } from './process.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function post(url: string, body: unknown, token: string): Promise<{ status: number; json: unknown }> {
  const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, json: await response.json() };
}

describe('tabula-server CLI', () => {
  it('explains every flag with --help', async () => {
    const run = runCli(['--help']);
    expect(await run.exited).toBe(0);
    const help = run.lines.join('\n');
    for (const flag of ['--port', '--host', '--db', '--postgres', '--jwks-url', '--issuer', '--audience', '--cors', 'TABULA_JWT_SECRET']) expect(help).toContain(flag);
    // Every limit, with its default.
    const { maxPushItems, maxPullItems, bodyTimeoutMs, maxStreamsPerUser } = DEFAULT_SYNC_LIMITS;
    for (const limit of ['1 MiB', `${maxPushItems} items`, '512 KiB', `${maxPullItems} items`, `${bodyTimeoutMs / 1000} s`, `${maxStreamsPerUser} per user`, '256 KiB', '"exp"']) expect(help).toContain(limit);
  });

  it('refuses --issuer or --audience without --jwks-url, and --jwks-url without --audience, with exit 2', async () => {
    const db = ['--port', '0', '--db', path.join(dir, 'flags.db')];
    const [issuer, audience, noAudience] = await Promise.all([
      refusal([...db, '--issuer', 'https://id.example']),
      refusal([...db, '--audience', 'tabula']),
      refusal([...db, '--jwks-url', 'http://127.0.0.1:9/jwks.json']),
    ]);
    expect(issuer).toMatchObject({ code: 2, stderr: expect.stringContaining('--issuer applies only with --jwks-url') as string });
    expect(audience).toMatchObject({ code: 2, stderr: expect.stringContaining('--audience applies only with --jwks-url') as string });
    expect(noAudience).toMatchObject({ code: 2, stderr: expect.stringContaining('--audience is required with --jwks-url') as string });
  });

  it('refuses a guessable TABULA_JWT_SECRET with exit 2, saying how to make one, before creating the database', async () => {
    const db = path.join(dir, 'weak.db');
    const weak = await refusal(['--port', '0', '--db', db], { TABULA_JWT_SECRET: 'a'.repeat(32) });
    expect(weak).toMatchObject({ code: 2, stderr: expect.stringContaining('openssl rand -base64 32') as string });
    expect(weak.stderr).toContain('TABULA_JWT_SECRET');
    expect(existsSync(db)).toBe(false);
  });

  it('takes only a plain decimal port from 0 to 65535', async () => {
    const refused = await Promise.all(['', '0x0', '1e3', ' 80', '+80', '65536', '-1'].map((port) => refusal([`--port=${port}`, '--db', path.join(dir, 'port.db')])));
    for (const run of refused) expect(run).toMatchObject({ code: 2, stderr: expect.stringContaining('--port must be a decimal port number from 0 to 65535') as string });
  });

  it('refuses to start without TABULA_JWT_SECRET or --jwks-url, and on an unknown flag', async () => {
    const noAuth = runCli(['--db', path.join(dir, 'x.db')], { TABULA_JWT_SECRET: '' });
    expect(await noAuth.exited).toBe(2);
    expect(noAuth.stderr()).toContain('TABULA_JWT_SECRET');
    const unknown = runCli(['--bogus']);
    expect(await unknown.exited).toBe(2);
    expect(unknown.stderr()).toContain('--bogus');
  });

  it('serves /v1/health on SQLite and stops on SIGTERM with an event stream open', async () => {
    const server = await startServerProcess(['--db', path.join(dir, 'cli.db')]);
    expect(await (await fetch(`${server.url}/v1/health`)).json()).toEqual({ ok: true, protocol: 1 });
    const alice = uniqueUser('alice');
    const token = await tokenFor(alice);
    expect((await post(`${server.url}/v1/push`, { clientId: 'c', items: [{ seq: 1, op: noteOp(alice, 's', 1) }] }, token)).json).toEqual({ lastSeq: 1 });
    const events = sseReader(await fetch(`${server.url}/v1/events`, { headers: { authorization: `Bearer ${token}` } }));
    expect((await events.next()).event).toBe('poke');
    // HEAD holds no stream; GETs do, up to the limit per user.
    const head = await fetch(`${server.url}/v1/events`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
    expect([head.status, head.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    const more = await Promise.all(Array.from({ length: DEFAULT_SYNC_LIMITS.maxStreamsPerUser - 1 }, () => fetch(`${server.url}/v1/events`, { headers: { authorization: `Bearer ${token}` } })));
    expect(more.map((response) => response.status)).toEqual(more.map(() => 200));
    const refused = await fetch(`${server.url}/v1/events`, { headers: { authorization: `Bearer ${token}` } });
    expect([refused.status, ErrorResponseSchema.parse(await refused.json()).error.code]).toEqual([429, 'sync/rate-limited']);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.lines.join('\n')).toContain('stopped');
  });
});

describe('two server processes on one PostgreSQL', () => {
  it('pokes a listener on instance 2 when a client pushes to instance 1, and instance 2 serves the items', async () => {
    const url = inject('postgresUrl');
    const [one, two] = await Promise.all([startServerProcess(['--postgres', url]), startServerProcess(['--postgres', url])]);
    try {
      const alice = uniqueUser('alice');
      const token = await tokenFor(alice);
      const events = sseReader(await fetch(`${two.url}/v1/events`, { headers: { authorization: `Bearer ${token}` } }));
      expect(await events.next()).toMatchObject({ event: 'poke', data: expect.stringMatching(/^\{"cursor":"0","time":\d+\}$/) as unknown });
      const items = [1, 2, 3].map((seq) => ({ seq, op: noteOp(alice, 's', seq) }));
      expect((await post(`${one.url}/v1/push`, { clientId: 'laptop', items }, token)).json).toEqual({ lastSeq: 3 });
      const poke = await events.next();
      const pulled = PullResponseSchema.parse((await post(`${two.url}/v1/pull`, { cursor: null }, token)).json);
      // The items crossed instances in the NOTIFY payload, as instance 2 would serve them.
      expect(poke.event).toBe('poke');
      expect(PokeEventSchema.parse(JSON.parse(poke.data))).toEqual({ cursor: '3', after: null, items: pulled.items, time: expect.any(Number) as unknown });
      expect(pulled.items.map((item) => ('op' in item ? item.op.id : ''))).toEqual(items.map((item) => item.op.id));
      expect(pulled.items.every((item) => item.clientId === 'laptop')).toBe(true);
      await events.close();
    } finally {
      one.child.kill('SIGTERM');
      two.child.kill('SIGTERM');
      expect(await Promise.all([one.exited, two.exited])).toEqual([0, 0]);
    }
  });
});
