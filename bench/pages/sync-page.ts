/**
 * In-page half of the sync benchmark (bench/sync.bench.ts drives it). One
 * page per browser context, i.e. per device. Times are absolute
 * (`performance.timeOrigin + performance.now()`), so a send on one device
 * and its arrival on the other can be subtracted. Baselines live here too:
 * a raw `fetch` POST and a raw `/v1/events` reader, and a raw Dexie
 * `bulkAdd` of the rows a pull stores.
 */
import { Dexie } from 'dexie';
import { expose } from './expose.js';
import { makeOp } from '../../src/core/index.js';
import * as current from '../../src/index.js';
import { openTabula, ApproxTokenCounter, type SessionExport, type Tabula } from '../../src/index.js';
import { createDb } from '../../src/store/db/schema.js';
import * as currentSync from '../../src/sync/index.js';
import { PullResponseSchema, httpSync } from '../../src/sync/index.js';
import { parseWire } from '../../src/sync/protocol.js';

const now = (): number => performance.timeOrigin + performance.now();

let device: Tabula | null = null;

/** The sync requests of this page's device: path, when sent, when the answer's headers came. */
const requestLog: { path: string; start: number; end: number }[] = [];
const loggedFetch: typeof fetch = async (input, init) => {
  const entry = { path: new URL(input instanceof Request ? input.url : String(input)).pathname, start: now(), end: Number.NaN };
  requestLog.push(entry);
  if (requestLog.length > 1000) requestLog.splice(0, 500);
  const response = await fetch(input, init);
  entry.end = now();
  return response;
};

/** The logged requests sent at or after `since`. */
function requestsSince(since: number): { path: string; start: number; end: number }[] {
  return requestLog.filter((entry) => entry.start >= since);
}
let nextRemote: { resolve: (at: number) => void } | null = null;

/**
 * Opens this page's device: Tabula with httpSync. With `src` (the URL path of another checkout's src
 * directory, served by the same Vite), that Tabula: an earlier version measured in the same run.
 */
async function openDevice(options: { name: string; userId: string; url: string; token: string; pollIntervalMs?: number; src?: string }): Promise<void> {
  const { name, userId, url, token, pollIntervalMs, src } = options;
  const { openTabula, ApproxTokenCounter } = src ? ((await import(/* @vite-ignore */ `${src}/index.ts`)) as typeof current) : current;
  const { httpSync } = src ? ((await import(/* @vite-ignore */ `${src}/sync/index.ts`)) as typeof currentSync) : currentSync;
  device = await openTabula({
    name,
    userId,
    tokenCounter: new ApproxTokenCounter(),
    sync: httpSync({ url, token, fetch: loggedFetch, ...(pollIntervalMs === undefined ? {} : { pollIntervalMs }) }),
  });
  device.subscribe((change) => {
    if (change.origin === 'remote' && change.kinds.includes('message.append') && nextRemote) {
      nextRemote.resolve(now());
      nextRemote = null;
    }
  });
  await device.session('latency');
  await device.sync?.flush();
}

let arrived: Promise<number> | null = null;

/** Arms the wait for the next remote append; `arrival()` returns when it came. */
function armRemote(): void {
  arrived = new Promise<number>((resolve) => (nextRemote = { resolve }));
}

function arrival(): Promise<number> {
  if (!arrived) throw new Error('armRemote() first');
  return arrived;
}

/** Appends one message; returns the time just before the call and when it was committed locally. */
async function appendNow(content: string): Promise<{ at: number; committed: number }> {
  if (!device) throw new Error('openDevice() first');
  const session = await device.session('latency');
  const at = now();
  await session.append({ role: 'user', content });
  return { at, committed: now() };
}

// --- Baseline (a): a raw POST whose payload reaches another client's open /v1/events stream.

let pokes: { resolve: (at: number) => void } | null = null;
let streamOpen: Promise<void> | null = null;
let poked: Promise<number> | null = null;

/** Opens `/v1/events` with fetch and notes the time of every poke. */
function openEvents(url: string, token: string): Promise<void> {
  streamOpen = (async () => {
    const response = await fetch(`${url}/v1/events`, { headers: { authorization: `Bearer ${token}` } });
    if (!response.ok || !response.body) throw new Error(`events: HTTP ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    // The server pokes once at connect; the stream counts as open from then.
    const gate: { first: (() => void) | null } = { first: null };
    const ready = new Promise<void>((resolve) => (gate.first = resolve));
    void (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!event.startsWith('event: poke')) continue;
          const at = now();
          if (gate.first) {
            gate.first();
            gate.first = null;
          } else if (pokes) {
            pokes.resolve(at);
            pokes = null;
          }
        }
      }
    })();
    await ready;
  })();
  return streamOpen;
}

function armPoke(): void {
  poked = new Promise<number>((resolve) => (pokes = { resolve }));
}

function pokeArrival(): Promise<number> {
  if (!poked) throw new Error('armPoke() first');
  return poked;
}

let rawSeq = 0;
const rawClient = `raw${Math.random().toString(36).slice(2, 10)}`;

/** POSTs one note op to /v1/push with plain fetch; returns the time just before the call. */
async function rawPush(url: string, token: string, userId: string): Promise<number> {
  rawSeq += 1;
  const wall = Date.now();
  const op = makeOp('note.add', {
    id: crypto.randomUUID(),
    userId,
    sessionId: 'raw',
    order: `${String(wall).padStart(15, '0')}.${rawSeq.toString(16).padStart(6, '0')}.${rawClient}`,
    body: { text: `raw ${rawSeq}`, runId: null, scope: null, at: wall },
  });
  const at = now();
  const response = await fetch(`${url}/v1/push`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ clientId: rawClient, items: [{ seq: rawSeq, op }] }),
  });
  if (!response.ok) throw new Error(`push: HTTP ${response.status} ${await response.text()}`);
  return at;
}

// --- (b) a new device pulling a long session, (c) importSession; both beside raw bulkAdd.

/** Opens a fresh device and flushes until caught up; returns ms and what it stored. */
async function pullFresh(options: { name: string; userId: string; url: string; token: string; sessionId: string }): Promise<{ ms: number; messages: number }> {
  const start = performance.now();
  const tabula = await openTabula({
    name: options.name,
    userId: options.userId,
    tokenCounter: new ApproxTokenCounter(),
    sync: httpSync({ url: options.url, token: options.token, pollIntervalMs: 3_600_000 }),
  });
  await tabula.sync?.flush();
  const ms = performance.now() - start;
  const messages = await (await tabula.session(options.sessionId)).messageCount();
  await tabula.close();
  return { ms, messages };
}

/**
 * Where a pull's time goes, outside the client: every page fetched and read as text (network and the
 * server), JSON.parse, and the protocol's zod validation, each summed over the pages. What the
 * client's pull takes beyond their sum is applying (applyOps, bulkAdd, cursor writes).
 */
async function pullBreakdown(url: string, token: string): Promise<{ pages: number; networkMs: number; parseMs: number; validateMs: number }> {
  let cursor: string | null = null;
  const out = { pages: 0, networkMs: 0, parseMs: 0, validateMs: 0 };
  for (;;) {
    let start = performance.now();
    const response = await fetch(`${url}/v1/pull`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ cursor }),
    });
    const text = await response.text();
    out.networkMs += performance.now() - start;
    start = performance.now();
    const json: unknown = JSON.parse(text);
    out.parseMs += performance.now() - start;
    start = performance.now();
    const page = parseWire(PullResponseSchema, json, 'The pull response');
    out.validateMs += performance.now() - start;
    out.pages += 1;
    cursor = page.cursor;
    if (!page.more) return out;
  }
}

/** The session's export, kept in the page for importSession runs. */
let exported: SessionExport | null = null;

async function exportSession(name: string, userId: string, sessionId: string): Promise<number> {
  const tabula = await openTabula({ name, userId, tokenCounter: new ApproxTokenCounter() });
  exported = await (await tabula.session(sessionId)).export();
  await tabula.close();
  return exported.messages.length;
}

/** importSession of the exported session into a fresh database; returns ms. */
async function importFresh(name: string, userId: string): Promise<number> {
  if (!exported) throw new Error('exportSession() first');
  const tabula = await openTabula({ name, userId, tokenCounter: new ApproxTokenCounter() });
  const start = performance.now();
  await tabula.importSession(exported);
  const ms = performance.now() - start;
  await tabula.close();
  return ms;
}

/** Raw Dexie: bulkAdd the message rows of `name` (as Tabula stored them) into a fresh database with the same indexes. */
async function rawBulkAdd(fromName: string, toName: string): Promise<number> {
  const source = createDb(fromName);
  const rows = await source.messages.toArray();
  source.close();
  const target = new Dexie(toName);
  target.version(1).stores({ messages: '[userId+sessionId+id], [userId+sessionId+order], [userId+sessionId+streaming]' });
  await target.open();
  const start = performance.now();
  await target.transaction('rw', target.table('messages'), () => target.table('messages').bulkAdd(rows));
  const ms = performance.now() - start;
  target.close();
  return ms;
}

/** Whether this page's sync client has opened `/v1/events` (it listens for pokes) so far. */
function usesEvents(): boolean {
  return requestLog.some((entry) => entry.path === '/v1/events');
}

async function deleteDb(name: string): Promise<void> {
  await Dexie.delete(name);
}

expose({ openDevice, armRemote, arrival, appendNow, openEvents, armPoke, pokeArrival, rawPush, pullFresh, exportSession, importFresh, rawBulkAdd, pullBreakdown, usesEvents, requestsSince, deleteDb });
