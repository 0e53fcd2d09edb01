/**
 * In-page half of the peers benchmark (bench/peers.bench.ts drives it):
 * the same functions for every system, each returning raw samples in ms.
 * Cross-tab latency is measured on the wall clock shared by the tabs
 * (performance.timeOrigin + performance.now()).
 */
import { expose } from '../expose.js';
import type { PeerInstance, PeerSystem } from './types.js';

export function exposeHarness(system: PeerSystem): void {
  const db = `peers-${system.name}`;
  let instance: PeerInstance | null = null;
  const current = async () => (instance ??= await system.open(db));
  let armed: Promise<number> | null = null;
  let stopWatching: (() => void) | null = null;

  expose({
    name: system.name,
    /** Bulk-inserts `count` messages into a new chat; returns ms. */
    async bulk(chat: string, count: number, path: 'bulk' | 'bulkAppend' = 'bulk'): Promise<number> {
      const store = await current();
      if (path === 'bulkAppend' && !store.bulkAppend) throw new Error(`${system.name} has no ${path} path`);
      const start = performance.now();
      await (path === 'bulkAppend' ? store.bulkAppend?.(chat, 0, count) : store.bulk(chat, 0, count));
      return performance.now() - start;
    },
    /** Appends `runs` messages to `chat`, numbered from `from`; returns one sample per append. */
    async append(chat: string, from: number, runs: number): Promise<number[]> {
      const store = await current();
      const samples: number[] = [];
      for (let i = 0; i < runs; i++) {
        const start = performance.now();
        await store.append(chat, from + i);
        samples.push(performance.now() - start);
      }
      return samples;
    },
    /** Opens a new instance, reads the last 50 of `chat`, closes it; one sample per run. */
    async openLast(chat: string, runs: number): Promise<number[]> {
      const samples: number[] = [];
      for (let i = 0; i < runs; i++) {
        const start = performance.now();
        const fresh = await system.open(db);
        const got = await fresh.last(chat, 50);
        samples.push(performance.now() - start);
        await fresh.close();
        if (got !== 50) throw new Error(`${system.name}: expected 50 messages, got ${got}`);
      }
      return samples;
    },
    /** Tab B: starts watching `chat` (resolves once the watch is live). */
    async watch(chat: string): Promise<void> {
      const store = await current();
      stopWatching?.();
      let fire: (at: number) => void = () => undefined;
      const next = () => {
        armed = new Promise<number>((resolve) => (fire = resolve));
      };
      next();
      stopWatching = await store.watch(chat, () => fire(performance.timeOrigin + performance.now()));
      (window as unknown as { rearm: () => void }).rearm = next;
    },
    /** Tab B: the wall-clock time of the next event, armed before tab A writes. */
    arm(): void {
      (window as unknown as { rearm: () => void }).rearm();
    },
    async event(): Promise<number> {
      if (!armed) throw new Error('watch() first');
      let timer = 0;
      const timeout = new Promise<never>((_, reject) => {
        timer = window.setTimeout(() => reject(new Error(`${system.name}: no cross-tab event within 10 s`)), 10_000);
      });
      try {
        return await Promise.race([armed, timeout]);
      } finally {
        window.clearTimeout(timer);
      }
    },
    /** Tab A: appends message `i` to `chat`; returns the wall-clock time it started. */
    async appendAt(chat: string, i: number): Promise<number> {
      const store = await current();
      const at = performance.timeOrigin + performance.now();
      await store.append(chat, i);
      return at;
    },
    async close(): Promise<void> {
      stopWatching?.();
      await instance?.close();
      instance = null;
    },
  });
}
