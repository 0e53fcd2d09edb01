/**
 * What every system in the peers benchmark implements, so the same harness
 * (harness.ts) drives Tabula, RxDB, TinyBase and raw Dexie alike.
 */

/** One chat message as the benchmark writes it (209 characters of content). */
export interface BenchMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

/** A system under test, opened once per instance. */
export interface PeerSystem {
  readonly name: string;
  /** Opens a new instance of the store in database `db`. */
  open(db: string): Promise<PeerInstance>;
}

export interface PeerInstance {
  /** Inserts messages [from, from + count) into chat `chat` with the system's bulk path. */
  bulk(chat: string, from: number, count: number): Promise<void>;
  /** A second bulk path (Tabula: `append(batch)` besides `importSession`). */
  bulkAppend?(chat: string, from: number, count: number): Promise<void>;
  /** Appends message `i` to `chat`; resolves when the system says it is stored. */
  append(chat: string, i: number): Promise<void>;
  /** Reads the last `count` messages of `chat` in order; returns how many came back. */
  last(chat: string, count: number): Promise<number>;
  /** Calls `onChange` when another tab appends to `chat`; returns the unsubscribe function. */
  watch(chat: string, onChange: () => void): Promise<() => void>;
  close(): Promise<void>;
}

const FILLER =
  ' Option A is cheaper to run, but option B is faster to set up and easier to maintain over the next quarter; both need a review of the budget and the on-call rota.';

/** Message `i`: alternating user and assistant, exactly 209 characters. */
export function benchMessage(i: number): BenchMessage {
  const head = i % 2 === 0 ? `Question ${i}: could you compare the two options?` : `Answer ${i}: here is the comparison.`;
  return { role: i % 2 === 0 ? 'user' : 'assistant', content: (head + FILLER + FILLER).slice(0, 209) };
}
