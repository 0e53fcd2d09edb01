/**
 * Replicas for the guards of the one write path (apply/out-of-order.test.ts, apply/late-arrivals.test.ts, apply/session-lives.test.ts): ops made by
 * hand with order keys of named devices, applied to fresh databases one batch (one sync pull) at a
 * time, and everything the public API shows of the session, to compare a replica that got the ops in
 * order-key order with one that got them late.
 */
import { expect } from 'vitest';
import { ApproxTokenCounter, type Op, type OpBody, type OpKind } from '../../../src/core/index.js';
import { formatHlc } from '../../../src/core/hlc.js';
import { openTabula, type Tabula } from '../../../src/index.js';
import { applyOps } from '../../../src/store/apply/index.js';
import { createDb, sessionTables } from '../../../src/store/db/schema.js';
import { uniqueName } from './helpers.js';

export const USER = 'u';
export const SESSION = 's';
export const BASE_MS = 1_700_000_000_000;

/** The order key of a device's event at `ms` milliseconds after BASE_MS. */
export function at(ms: number, device = 'a'): string {
  return formatHlc({ wallMs: BASE_MS + ms, counter: 0, clientId: device });
}

let opSeq = 0;
export function op<K extends OpKind>(kind: K, order: string, body: OpBody<K>, sessionId = SESSION): Op {
  return { id: `op${++opSeq}`, kind, userId: USER, sessionId, order, body } as Op;
}

export const create = (order: string, sessionId = SESSION) => op('session.create', order, { createdAt: 1, forkOf: null }, sessionId);
export const append = (order: string, id: string, content = id, status: 'complete' | 'streaming' = 'complete') =>
  op('message.append', order, { id, createdAt: 1, status, message: { role: 'user', content } });
export const update = (order: string, id: string, content: string, status: 'complete' | 'streaming' | 'interrupted') =>
  op('message.update', order, { id, status, message: { role: 'assistant', content } });
export const prefix = (order: string, systemPrompt: string) => op('prefix.set', order, { prefix: { systemPrompt, grounding: [], schemaBlock: null } });
export const save = (order: string, version: number, patch: OpBody<'state.save'>['patch']) => op('state.save', order, { version, patch });
export const memorySet = (order: string, key: string, value: number) => op('memory.set', order, { scope: 'default', key, value });
export const memoryDelete = (order: string, key: string) => op('memory.delete', order, { scope: 'default', key });
export const snapshotOf = (messages: { id: string; order: string }[], summary = 'cp') => ({
  prefix: { systemPrompt: 'from checkpoint', grounding: [], schemaBlock: null },
  state: { summary, tasks: null, plan: null, permissions: null, tools: [], context: {} },
  messages: messages.map((m) => ({ ...m, createdAt: 1, status: 'complete' as const, message: { role: 'user' as const, content: m.id } })),
});

const opened: Tabula[] = [];

/** Closes the Tabulas that {@link openReplica} opened: each test file calls it in its afterEach (a hook here would bind to one file only when files share modules, as in mutation runs). */
export async function closeReplicas(): Promise<void> {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
}

/** A replica: a database the ops are applied to, one batch (one sync pull) at a time. */
export async function replica(...batches: Op[][]): Promise<{ name: string; applied: Op[][] }> {
  const name = uniqueName('replica');
  const db = createDb(name);
  const applied: Op[][] = [];
  for (const batch of batches) applied.push(await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch)));
  db.close();
  return { name, applied };
}

export async function openReplica(name: string): Promise<Tabula> {
  const tabula = await openTabula({ name, userId: USER, tokenCounter: new ApproxTokenCounter(), onError: (error) => { throw error; } });
  opened.push(tabula);
  return tabula;
}

/** Everything the public API shows of the session (null when it does not exist). */
export async function view(name: string, sessionId = SESSION) {
  const tabula = await openReplica(name);
  const info = (await tabula.sessions()).find((s) => s.sessionId === sessionId);
  if (!info) return null;
  const session = await tabula.session(sessionId);
  const memory = session.memory('default');
  const keys = (await memory.keys()).sort();
  const { updatedAt: _updatedAt, ...state } = await session.state();
  return {
    info: { messageCount: info.messageCount, version: info.version, summary: info.summary, updatedAt: info.updatedAt },
    messages: (await session.messages()).map((m) => `${m.id}:${m.status}:${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`),
    messageCount: await session.messageCount(),
    prefix: (await session.prefix()).systemPrompt,
    state,
    journal: await session.journal.view(),
    pending: await session.journal.diff(),
    notes: (await session.notes()).map((n) => n.text),
    memory: Object.fromEntries(await Promise.all(keys.map(async (key) => [key, await memory.get(key)] as const))),
    checkpoints: (await session.checkpoints()).map((c) => c.id),
    tokens: await session.tokens(),
  };
}

/** Applies `ops` in order-key order to one replica and as `late` batches to another; both must show the same. */
export async function converge(late: Op[][]) {
  const all = late.flat();
  const inOrder = await replica([...all].sort((x, y) => (x.order < y.order ? -1 : x.order > y.order ? 1 : 0)));
  const lateReplica = await replica(...late);
  const expected = await view(inOrder.name);
  expect(await view(lateReplica.name)).toEqual(expected);
  return { expected, late: lateReplica };
}
