/**
 * An append-only journal with a watermark: a producer records entries, a
 * consumer takes `diff()` (everything past the watermark) and acknowledges
 * it with `markCommitted()`. Entries are never rewritten, so attribution
 * stamped on an entry survives every merge.
 *
 * The journal stores entries by identity and does not copy or validate them:
 * it belongs to one agent. The persisted journal of a session (JSON entries)
 * is built on the same semantics in the store.
 */

import { checkIterable } from './args.js';

/** Append-only entries plus a watermark of what a consumer has acknowledged. */
export class MutationJournal<E = unknown> {
  #entries: E[];
  #watermark: number;
  #view: readonly E[] | null = null;

  /** Seed entries count as committed: the watermark starts past them. */
  constructor(initial: Iterable<E> = []) {
    this.#entries = [...checkIterable(initial, 'new MutationJournal(initial)')];
    this.#watermark = this.#entries.length;
  }

  /** How many entries the consumer has acknowledged. */
  get watermark(): number {
    return this.#watermark;
  }

  /** How many entries there are, committed or not. */
  get length(): number {
    return this.#entries.length;
  }

  /** Appends one entry. */
  record(entry: E): void {
    this.#entries.push(entry);
    this.#view = null;
  }

  /**
   * Appends a batch in arrival order. The batch is read in full first, so an
   * iterable that throws part-way appends nothing.
   */
  apply(entries: Iterable<E>): void {
    const batch = [...checkIterable(entries, 'journal.apply(entries)')];
    if (batch.length === 0) return;
    this.#entries.push(...batch);
    this.#view = null;
  }

  /** The entries past the watermark, oldest first. */
  diff(): readonly E[] {
    return Object.freeze(this.#entries.slice(this.#watermark));
  }

  /** Acknowledges every entry recorded so far. */
  markCommitted(): void {
    this.#watermark = this.#entries.length;
  }

  /** Every entry, oldest first, as a frozen array (the entries themselves are not copied). */
  view(): readonly E[] {
    this.#view ??= Object.freeze(this.#entries.slice());
    return this.#view;
  }

  /** An independent journal with the same entries and the same watermark. */
  clone(): MutationJournal<E> {
    const copy = new MutationJournal<E>(this.#entries);
    copy.#watermark = this.#watermark;
    return copy;
  }
}
