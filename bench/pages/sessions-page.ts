/**
 * In-page half of the sessions benchmark (bench/sessions.bench.ts drives
 * it). Every function returns raw samples in ms; the Node side summarises.
 * Baselines live here too, measured in the same page and run:
 * - a naive store keeping a whole session as one IndexedDB record,
 *   rewritten on every append (what a single-blob state store does);
 * - raw IndexedDB reading the last 50 rows with a reverse cursor.
 */
import { expose } from './expose.js';
import { openTabula, type Message, type Session, type Tabula } from '../../src/index.js';

const SEED_BATCH = 5_000;

function message(i: number): Message {
  return i % 2 === 0
    ? { role: 'user', content: `Question ${i}: could you compare option ${i % 7} with option ${(i + 3) % 7}?` }
    : { role: 'assistant', content: `Answer ${i}: option ${i % 7} is cheaper, but option ${(i + 3) % 7} is faster to set up and easier to maintain.` };
}

const DB_NAME = `bench-sessions-${Date.now()}`;
let tabula: Tabula | null = null;
const sessions = new Map<number, Session>();

async function ensureTabula(): Promise<Tabula> {
  tabula ??= await openTabula({ name: DB_NAME });
  return tabula;
}

/** Creates a session of n messages through the public API (batched appends). */
async function seed(n: number): Promise<number> {
  const db = await ensureTabula();
  const start = performance.now();
  const session = await db.session(`n${n}`);
  for (let done = 0; done < n; done += SEED_BATCH) {
    await session.append(Array.from({ length: Math.min(SEED_BATCH, n - done) }, (_, k) => message(done + k)));
  }
  sessions.set(n, session);
  return performance.now() - start;
}

async function appendSamples(n: number, runs: number): Promise<number[]> {
  const session = sessions.get(n);
  if (!session) throw new Error(`seed(${n}) first`);
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await session.append(message(n + i));
    samples.push(performance.now() - start);
  }
  return samples;
}

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error('IndexedDB request failed'));
  });
}

function done(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error ?? new Error('transaction failed'));
    tx.onabort = () => reject(tx.error ?? new Error('transaction aborted'));
  });
}

let naive: IDBDatabase | null = null;

async function naiveDb(): Promise<IDBDatabase> {
  if (naive) return naive;
  const open = indexedDB.open(`bench-naive-${Date.now()}`, 1);
  open.onupgradeneeded = () => open.result.createObjectStore('sessions', { keyPath: 'id' });
  naive = await request(open);
  return naive;
}

/** The naive store: one record per session holding every message. */
async function naiveSeed(n: number): Promise<void> {
  const db = await naiveDb();
  const tx = db.transaction('sessions', 'readwrite');
  tx.objectStore('sessions').put({ id: `n${n}`, version: 0, messages: Array.from({ length: n }, (_, i) => ({ ...message(i), id: String(i) })) });
  await done(tx);
}

async function naiveAppendSamples(n: number, runs: number): Promise<number[]> {
  const db = await naiveDb();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const tx = db.transaction('sessions', 'readwrite');
    const store = tx.objectStore('sessions');
    const record = (await request(store.get(`n${n}`))) as { messages: unknown[]; version: number };
    record.messages.push({ ...message(n + i), id: String(n + i) });
    record.version += 1;
    store.put(record);
    await done(tx);
    samples.push(performance.now() - start);
  }
  return samples;
}

/** Open the session and read its last 50 messages, through Tabula. */
async function readLastSamples(n: number, runs: number): Promise<number[]> {
  const db = await ensureTabula();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const session = await db.session(`n${n}`);
    const last = await session.messages({ last: 50 });
    samples.push(performance.now() - start);
    if (last.length !== 50) throw new Error(`expected 50 messages, got ${last.length}`);
  }
  return samples;
}

let raw: IDBDatabase | null = null;

/** The same read with raw IndexedDB on Tabula's own database: a reverse cursor over the order index, 50 rows. */
async function rawReadLastSamples(n: number, runs: number): Promise<number[]> {
  await ensureTabula();
  raw ??= await request(indexedDB.open(DB_NAME));
  const samples: number[] = [];
  const range = IDBKeyRange.bound(['anonymous', `n${n}`, ''], ['anonymous', `n${n}`, '\uffff']);
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const tx = raw.transaction('messages', 'readonly');
    const cursorRequest = tx.objectStore('messages').index('[userId+sessionId+order]').openCursor(range, 'prev');
    const rows: unknown[] = await new Promise((resolve, reject) => {
      const out: unknown[] = [];
      cursorRequest.onsuccess = () => {
        const cursor = cursorRequest.result;
        if (!cursor || out.length === 50) return resolve(out.reverse());
        out.push(cursor.value);
        cursor.continue();
      };
      cursorRequest.onerror = () => reject(cursorRequest.error ?? new Error('cursor failed'));
    });
    samples.push(performance.now() - start);
    if (rows.length !== 50) throw new Error(`expected 50 rows, got ${rows.length}`);
  }
  return samples;
}

const bench = {
  seed,
  naiveSeed,
  appendSamples,
  naiveAppendSamples,
  readLastSamples,
  rawReadLastSamples,
};

expose(bench);
