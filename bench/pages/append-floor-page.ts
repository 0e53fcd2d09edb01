/**
 * In-page half of bench/append-floor.bench.ts: one append of a 209-character
 * message four ways, each in its own database, one sample of each in turn.
 * Every way ends with one BroadcastChannel message, as Tabula's change event
 * and the peers benchmark's raw Dexie floor do.
 * - `tabula`: `session.append()`.
 * - `dexie`: raw Dexie, `add` to a one-store database (the peers floor).
 * - `dexie3`: the requests an append with Tabula's guarantees needs (read the
 *   session row, add the message row, write the session row), in one Dexie
 *   transaction over the stores Tabula's append spans, with no other code.
 * - `native3`: the same three requests in one native IndexedDB transaction.
 * The rows written have the shape and size of Tabula's own.
 */
import { Dexie } from 'dexie';
import { openTabula, type Session, type Tabula } from '../../src/index.js';
import { createDb, type TabulaDb } from '../../src/store/db/schema.js';
import type { MessageRow, SessionRow } from '../../src/store/db/rows.js';
import { expose } from './expose.js';
import { benchMessage } from './peers/types.js';

const WAYS = ['tabula', 'dexie', 'dexie3', 'native3'] as const;
type Way = (typeof WAYS)[number];

let next = 0;
let open: { tabula: Tabula; session: Session; dexie: Dexie; floor: TabulaDb; row: SessionRow; channel: BroadcastChannel } | null = null;

const done = (tx: IDBTransaction) =>
  new Promise<void>((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new Error('transaction aborted'));
  });

/** A message row as Tabula stores it, for session `s`. */
const messageRowOf = (i: number): MessageRow => ({
  id: `${String(i).padStart(32, '0')}`,
  userId: 'anonymous',
  sessionId: 's',
  order: `${String(1_700_000_000_000 + i).padStart(15, '0')}.000000.floor`,
  createdAt: Date.now(),
  status: 'complete',
  message: benchMessage(i),
});

expose({
  /** Opens the four databases; seeds each with `n` messages. */
  async setUp(n: number): Promise<void> {
    const tabula = await openTabula({ name: 'floor-tabula' });
    const session = await tabula.session('s');
    await session.append(Array.from({ length: n }, (_, i) => benchMessage(i)));
    const dexie = new Dexie('floor-dexie');
    dexie.version(1).stores({ messages: 'id, [sessionId+order]' });
    await dexie.open();
    await dexie.table('messages').bulkAdd(Array.from({ length: n }, (_, i) => ({ id: `c:${i}`, sessionId: 'c', order: i, ...benchMessage(i), createdAt: Date.now() })));
    // Tabula's schema and its own session row, written by the code under measurement only.
    const floor = createDb('floor-requests');
    await floor.open();
    const row = (await createDb('floor-tabula').sessions.get(['anonymous', 's'])) as SessionRow;
    await floor.sessions.put(row);
    await floor.messages.bulkAdd(Array.from({ length: n }, (_, i) => messageRowOf(i)));
    next = n;
    open = { tabula, session, dexie, floor, row, channel: new BroadcastChannel('floor') };
  },
  /** `rounds` samples of each way, in turn; ms per append. */
  async samples(rounds: number): Promise<Record<Way, number[]>> {
    if (!open) throw new Error('setUp() first');
    const { session, dexie, floor, row, channel } = open;
    const out: Record<Way, number[]> = { tabula: [], dexie: [], dexie3: [], native3: [] };
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < WAYS.length; k++) {
        const way = WAYS[(k + round) % WAYS.length] as Way;
        const i = next++;
        const start = performance.now();
        if (way === 'tabula') {
          await session.append(benchMessage(i));
        } else if (way === 'dexie') {
          await dexie.table('messages').add({ id: `c:${i}`, sessionId: 'c', order: i, ...benchMessage(i), createdAt: Date.now() });
          channel.postMessage('c');
        } else if (way === 'dexie3') {
          await floor.transaction('rw', [floor.sessions, floor.messages, floor.meta, floor.outbox], () =>
            Promise.all([floor.sessions.get(['anonymous', 's']), floor.messages.bulkAdd([messageRowOf(i)]), floor.sessions.put({ ...row, messageCount: i })]),
          );
          channel.postMessage('c');
        } else {
          const tx = floor.backendDB().transaction(['sessions', 'messages', 'meta', 'outbox'], 'readwrite');
          const committed = done(tx);
          tx.objectStore('sessions').get(['anonymous', 's']);
          tx.objectStore('messages').add(messageRowOf(i));
          tx.objectStore('sessions').put({ ...row, messageCount: i });
          await committed;
          channel.postMessage('c');
        }
        out[way].push(performance.now() - start);
      }
    }
    return out;
  },
  async tearDown(): Promise<void> {
    if (!open) return;
    await open.tabula.close();
    open.dexie.close();
    open.floor.close();
    open.channel.close();
    open = null;
  },
});
