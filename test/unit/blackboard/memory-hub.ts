/**
 * An in-memory stand-in for BroadcastChannel between simulated tabs, with
 * control over delivery: frames wait in a queue until the test delivers
 * them, in any order, drops them or delivers them twice.
 */
import type { TabFrame, TabTransport } from '../../../src/blackboard/tab-provider.js';

interface Pending {
  readonly to: string; // the receiving endpoint
  readonly frame: TabFrame;
}

export class MemoryHub {
  readonly queue: Pending[] = [];
  readonly #endpoints = new Map<string, (frame: unknown) => void>();
  #next = 0;

  /** A transport for one tab; `endpoint` names it in the hub (not the peer id inside frames). */
  connect(): TabTransport & { readonly endpoint: string } {
    const endpoint = `e${this.#next++}`;
    return {
      endpoint,
      post: (frame) => {
        for (const other of this.#endpoints.keys()) if (other !== endpoint) this.queue.push({ to: other, frame: structuredClone(frame) });
      },
      onFrame: (receive) => {
        this.#endpoints.set(endpoint, receive);
      },
      close: () => {
        this.#endpoints.delete(endpoint);
      },
    };
  }

  /** Delivers the queued frame at `index` (dropping it if its endpoint left). */
  deliver(index: number, keepCopy = false): void {
    const [pending] = keepCopy ? [this.queue[index]] : this.queue.splice(index, 1);
    if (!pending) return;
    this.#endpoints.get(pending.to)?.(pending.frame);
  }

  drop(index: number): void {
    this.queue.splice(index, 1);
  }

  /** Delivers everything, including what deliveries cause, until the queue is empty. */
  drain(limit = 100_000): void {
    let steps = 0;
    while (this.queue.length > 0) {
      if (++steps > limit) throw new Error('the hub did not settle');
      this.deliver(0);
    }
  }

  /** Raw injection, as a rogue or buggy tab would send. */
  inject(raw: unknown): void {
    for (const receive of this.#endpoints.values()) receive(raw);
  }
}

/** A small seeded PRNG (mulberry32): the same seed replays the same test. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
