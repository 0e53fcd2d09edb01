/**
 * Shared test helpers for the sync server: valid ops, board updates from a
 * real Y.Doc, HS256 tokens, and requests through `server.fetch`.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import * as Y from 'yjs';
import { makeOp, type Op } from '../../src/core/index.js';
import type { StorePulledItem, SyncServer } from '../../src/server/index.js';
import { PullResponseSchema } from '../../src/sync/protocol.js';

/** A 32-byte HS256 secret for tests. */
export const SECRET = 'tabula-test-secret-0123456789-abcdef';

/** A user id no other test uses (the PostgreSQL tables are shared by every test). */
export function uniqueUser(name = 'user'): string {
  return `${name}-${randomUUID()}`;
}

/** An order key for the i-th op of a client. */
export function orderKey(i: number, clientId = 'c1'): string {
  return `${String(1_700_000_000_000 + i).padStart(15, '0')}.000000.${clientId}`;
}

/** A valid `note.add` op of `userId` in `sessionId`. */
export function noteOp(userId: string, sessionId: string, i: number, text = `note ${i}`): Op {
  return makeOp('note.add', { id: randomUUID(), userId, sessionId, order: orderKey(i), body: { text, runId: null, scope: null, at: i } });
}

/** Builds board updates by editing a real Y.Doc: one update per call of `write`. */
export function boardWriter(): { doc: Y.Doc; write(key: string, value: string): Uint8Array } {
  const doc = new Y.Doc();
  return {
    doc,
    write(key, value) {
      let captured: Uint8Array | undefined;
      const capture = (update: Uint8Array): void => {
        captured = update;
      };
      doc.on('update', capture);
      doc.getMap('board').set(key, value);
      doc.off('update', capture);
      return captured!;
    },
  };
}

/** The `board` map of a doc built from updates. */
export function boardOf(updates: readonly Uint8Array[]): Record<string, unknown> {
  const doc = new Y.Doc();
  for (const update of updates) Y.applyUpdate(doc, update);
  return doc.getMap('board').toJSON();
}

/** An HS256 token for `sub`, valid for an hour unless `exp`/`nbf` say otherwise. */
export async function tokenFor(sub: string, options: { secret?: string; exp?: number | string; nbf?: number | string } = {}): Promise<string> {
  const jwt = new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setIssuedAt();
  jwt.setExpirationTime(options.exp ?? '1h');
  if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
  return jwt.sign(new TextEncoder().encode(options.secret ?? SECRET));
}

/** A pulled item decoded: its wire JSON checked against the protocol's `PullItem` schema, board bytes from base64. */
export type DecodedItem = { position: number; clientId: string | null } & ({ op: Op } | { board: { sessionId: string; update: Uint8Array; after?: string } });

/** Decodes a store's pulled item; throws when its JSON is not a valid `PullItem`. */
export function decodePulled(item: StorePulledItem): DecodedItem {
  const [wire] = PullResponseSchema.parse({ items: [JSON.parse(item.json)], cursor: null, more: false }).items;
  if (!wire) throw new Error('no item');
  if ('op' in wire) return { position: item.position, clientId: wire.clientId, op: wire.op };
  const { sessionId, after } = wire.board;
  const update = new Uint8Array(Buffer.from(wire.board.update, 'base64'));
  return { position: item.position, clientId: wire.clientId, board: after === undefined ? { sessionId, update } : { sessionId, update, after } };
}

/** A JSON request to the server with a bearer token (or none). */
export async function call(server: Pick<SyncServer, 'fetch'>, path: string, body: unknown, token: string | null): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const response = await server.fetch(
    new Request(`http://tabula.test${path}`, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) }),
  );
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** Reads server-sent events from a response body; `next()` resolves with the next event (comments skipped). */
export function sseReader(response: Response): { next(): Promise<{ event: string; data: string }>; close(): Promise<void> } {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  return {
    async next() {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n').filter((line) => !line.startsWith(':'));
          if (lines.length === 0) continue;
          const field = (name: string): string => lines.filter((line) => line.startsWith(`${name}:`)).map((line) => line.slice(name.length + 1).trim()).join('\n');
          return { event: field('event') || 'message', data: field('data') };
        }
        const { done, value } = await reader.read();
        if (done) throw new Error('event stream ended');
        buffer += value;
      }
    },
    async close() {
      await reader.cancel();
    },
  };
}
