/**
 * Crash safety on SQLite with a real process: two clients stream pushes to a
 * server that is killed with SIGKILL mid-stream. After a restart on the same
 * file, every acknowledged push is there exactly once, nothing is there twice,
 * and each client goes on from the lastSeq it last saw acknowledged (re-sending
 * the push that was in flight, which the server takes or ignores by seq).
 * A SIGKILL leaves the kernel's page cache intact, so this proves the
 * transactions, not the disk: durability.test.ts proves the fsyncs.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { Op } from '../../src/core/index.js';
import { PullResponseSchema, type PullItem } from '../../src/sync/index.js';
import { noteOp, tokenFor, uniqueUser } from './helpers.js';
import { startServerProcess } from './process.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BATCH = 20;

async function post(url: string, body: unknown, token: string): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function pullAll(url: string, token: string): Promise<PullItem[]> {
  const items: PullItem[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page = PullResponseSchema.parse(await (await post(`${url}/v1/pull`, { cursor }, token)).json());
    items.push(...page.items);
    cursor = page.cursor;
    if (!page.more) return items;
  }
}

it('keeps every acknowledged push exactly once across a SIGKILL, and clients resume from their lastSeq', async () => {
  const db = path.join(dir, 'crash.db');
  const alice = uniqueUser('alice');
  const token = await tokenFor(alice);
  // Each client's ops, by seq (index seq - 1), generated ahead so a re-send is byte-identical.
  const clients = ['phone', 'laptop'].map((clientId) => ({
    clientId,
    ops: Array.from({ length: 2000 }, (_, i): Op => ({ ...noteOp(alice, clientId, i + 1), id: `${clientId}-${i + 1}-${randomUUID()}` })),
    acked: 0,
  }));
  const batchFrom = (client: (typeof clients)[number], from: number) =>
    client.ops.slice(from - 1, from - 1 + BATCH).map((op, i) => ({ seq: from + i, op }));

  const first = await startServerProcess(['--db', db]);
  let acks = 0;
  const stream = async (client: (typeof clients)[number]): Promise<void> => {
    for (;;) {
      let response: Response;
      try {
        response = await post(`${first.url}/v1/push`, { clientId: client.clientId, items: batchFrom(client, client.acked + 1) }, token);
      } catch {
        return; // The server died with this push in flight: it is not acknowledged.
      }
      const body = (await response.json()) as { lastSeq: number };
      client.acked = body.lastSeq;
      // Kill while the other client's push is on the wire: mid-stream, not between streams.
      if (++acks === 15) first.child.kill('SIGKILL');
    }
  };
  await Promise.all(clients.map(stream));
  expect(await first.exited).toBe('SIGKILL');
  expect(clients.every((client) => client.acked > 0)).toBe(true);

  const second = await startServerProcess(['--db', db]);
  try {
    const afterCrash = await pullAll(second.url, token);
    const ids = afterCrash.map((item) => ('op' in item ? item.op.id : ''));
    expect(new Set(ids).size).toBe(ids.length);
    for (const client of clients) {
      const mine = afterCrash.filter((item) => item.clientId === client.clientId).map((item) => ('op' in item ? item.op.id : ''));
      // A prefix of the client's ops, in order, at least as long as what was acknowledged
      // (the push in flight may have committed before its answer was lost).
      expect(mine.length).toBeGreaterThanOrEqual(client.acked);
      expect(mine).toEqual(client.ops.slice(0, mine.length).map((op) => op.id));
    }
    // Each client goes on from its acknowledged lastSeq: the in-flight batch is re-sent whole.
    for (const client of clients) {
      for (let round = 0; round < 2; round++) {
        const response = await post(`${second.url}/v1/push`, { clientId: client.clientId, items: batchFrom(client, client.acked + 1) }, token);
        expect(response.status).toBe(200);
        const { lastSeq } = (await response.json()) as { lastSeq: number };
        expect(lastSeq).toBe(client.acked + BATCH);
        client.acked = lastSeq;
      }
    }
    const final = await pullAll(second.url, token);
    for (const client of clients) {
      const mine = final.filter((item) => item.clientId === client.clientId).map((item) => ('op' in item ? item.op.id : ''));
      expect(mine).toEqual(client.ops.slice(0, client.acked).map((op) => op.id));
    }
  } finally {
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }
});
