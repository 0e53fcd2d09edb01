/**
 * The `tabula-server` CLI as a real process: help, refusing to start without
 * a way to check tokens, serving /v1/health, stopping on SIGTERM with an
 * event stream open; and two processes on one PostgreSQL, where a push to
 * one pokes a listener on the other.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { PokeEventSchema, PullResponseSchema } from '../../src/sync/index.js';
import { noteOp, sseReader, tokenFor, uniqueUser } from './helpers.js';
import { runCli, startServerProcess } from './process.js';

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
      expect(await events.next()).toEqual({ event: 'poke', data: '{"cursor":"0"}' });
      const items = [1, 2, 3].map((seq) => ({ seq, op: noteOp(alice, 's', seq) }));
      expect((await post(`${one.url}/v1/push`, { clientId: 'laptop', items }, token)).json).toEqual({ lastSeq: 3 });
      const poke = await events.next();
      const pulled = PullResponseSchema.parse((await post(`${two.url}/v1/pull`, { cursor: null }, token)).json);
      // The items crossed instances in the NOTIFY payload, as instance 2 would serve them.
      expect(poke.event).toBe('poke');
      expect(PokeEventSchema.parse(JSON.parse(poke.data))).toEqual({ cursor: '3', after: null, items: pulled.items });
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
