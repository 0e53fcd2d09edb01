/**
 * In-page half of the blackboard benchmark (bench/blackboard.bench.ts).
 * Two tabs load it: A writes, B observes. The raw baseline is a bare
 * BroadcastChannel between the same two tabs, timed the same way.
 */
import * as Y from 'yjs';
import { persistDoc } from '../../src/blackboard/persistence.js';
import { openTabula, type Blackboard, type Tabula } from '../../src/index.js';
import { expose } from './expose.js';

const now = () => performance.timeOrigin + performance.now();
let tabula: Tabula | null = null;
let board: Blackboard | null = null;
const received = new Map<number, number>();
const rawReceived = new Map<number, number>();
const raw = new BroadcastChannel('bench:raw');
raw.onmessage = (event: MessageEvent<{ i: number; echo?: boolean }>) => {
  if (event.data.echo) rawReceived.set(event.data.i, now());
  else rawReceived.set(event.data.i, now());
};
const echo = new BroadcastChannel('bench:echo');
const echoed = new Map<number, () => void>();
echo.onmessage = (event: MessageEvent<{ i: number; back: boolean }>) => {
  if (event.data.back) echoed.get(event.data.i)?.();
  else echo.postMessage({ i: event.data.i, back: true });
};

function current(): Blackboard {
  if (!board) throw new Error('open() first');
  return board;
}

const bench = {
  async open(dbName: string) {
    tabula = await openTabula({ name: dbName });
    board = (await tabula.session('bench')).blackboard;
    await board.whenLoaded;
    board.observe((changes) => {
      for (const change of changes) if (change.key === 'ping' && change.origin === 'tab') received.set(change.value as number, now());
    });
  },
  /** Tab A: sets ping = i and returns when it did. */
  ping(i: number): number {
    const at = now();
    current().set('ping', i);
    return at;
  },
  receivedAt: (i: number) => received.get(i) ?? 0,
  rawPing(i: number): number {
    const at = now();
    raw.postMessage({ i, data: new Uint8Array(40) });
    return at;
  },
  rawReceivedAt: (i: number) => rawReceived.get(i) ?? 0,
  /** Raw BroadcastChannel round trip to the other tab and back, in ms. */
  async rawRoundTrip(i: number): Promise<number> {
    const start = performance.now();
    await new Promise<void>((resolve) => {
      echoed.set(i, resolve);
      echo.postMessage({ i, back: false });
    });
    return performance.now() - start;
  },
  /** Writes `updates` updates over `keys` keys in a fresh database, then measures load and compaction. */
  async bigBoard(dbName: string, keys: number, updates: number) {
    const db = await openTabula({ name: dbName });
    const big = (await db.session('big')).blackboard;
    await big.whenLoaded;
    const writeStart = performance.now();
    for (let i = 0; i < updates; i++) {
      big.set(`key${i % keys}`, { i, note: `value ${i}` });
      // Wait for IndexedDB every 1,000 updates: y-indexeddb writes each update in its own transaction,
      // and an unbounded backlog of them slows Chromium's IndexedDB down more than linearly.
      if (i % 1000 === 999) await big.flushed();
    }
    await big.flushed();
    const writeMs = performance.now() - writeStart;
    await db.close();

    const storeName = `${encodeURIComponent(dbName)}:anonymous:big:blackboard`;
    const loadOnce = async (compact: boolean) => {
      const doc = new Y.Doc();
      const start = performance.now();
      const persistence = persistDoc(storeName, doc, { onError: () => undefined, compactAboveRows: compact ? 1 : Number.MAX_SAFE_INTEGER });
      await persistence.whenLoaded;
      const loadMs = performance.now() - start;
      const size = await persistence.size();
      const keysLoaded = doc.getMap('blackboard').size;
      await persistence.close();
      return { loadMs, ...size, keysLoaded };
    };
    await loadOnce(false); // warm-up: the first open of a database pays for its files
    const before = await loadOnce(false);
    const compaction = await loadOnce(true); // loads, then compacts the log into one row
    const after = await loadOnce(false);
    return { writeMs, before, compaction, after };
  },
};

expose(bench);
