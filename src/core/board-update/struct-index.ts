/**
 * The structs of an update read so far, indexed for the board rules: each struct's first clock and tag,
 * and each client's run, so an origin's id (client, clock) finds the struct that holds it in O(log n). It
 * records what the walk and the rules tell it; it reads no bytes and decides nothing.
 */

// A struct's tag: these for a GC run, a skip, an item of another parent, an item of the blackboard map;
// 0 and up, the index of an item whose parent comes from an origin (the board rules' deferred items).
/** Tag of a GC run. */
export const TAG_GC = -1;
/** Tag of a skip; also what an id no struct of the update holds is taken for. */
export const TAG_SKIP = -2;
/** Tag of an item whose parent is not the blackboard map. */
export const TAG_OTHER = -3;
/** Tag of an item of the blackboard map. */
export const TAG_BOARD = -4;

/** The structs read so far, in update order (a struct's number is its place in that order). */
export class StructIndex {
  // Every struct: its first clock and tag.
  readonly #starts: number[] = [];
  readonly #tags: number[] = [];
  // Every client's run read so far: client → [index of its first struct, of its last, the clock after it].
  readonly #runs = new Map<number, [number, number, number]>();
  /** The first struct of the client being read. */
  #runStart = 0;

  /** How many structs are recorded: the number the next one gets. */
  get size(): number {
    return this.#starts.length;
  }

  /** The tag of struct `struct` (one recorded). */
  tag(struct: number): number {
    return this.#tags[struct]!;
  }

  /** Starts the run of the next client read. */
  beginRun(): void {
    this.#runStart = this.#starts.length;
  }

  /** Records a struct of the client being read, starting at `clock`. */
  add(clock: number, tag: number): void {
    this.#starts.push(clock);
    this.#tags.push(tag);
  }

  /** Ends the run of `client`, whose structs run to `clock` (exclusive), and makes it findable. */
  endRun(client: number, clock: number): void {
    this.#runs.set(client, [this.#runStart, this.#starts.length - 1, clock]);
  }

  /** The index of the struct of a run read to its end holding id (client, clock), or -1 when none does. */
  find(client: number, clock: number): number {
    const run = this.#runs.get(client);
    if (run === undefined || clock < this.#starts[run[0]]! || clock >= run[2]) return -1;
    return this.#search(run[0], run[1], clock);
  }

  /**
   * The index of the struct of the client being read, among those recorded so far, that holds `clock`,
   * or -1 when `clock` is before them all (or none is recorded). `clock` is before the struct being read
   * (an origin in its own client must be, and is checked to be), so it needs no upper bound.
   */
  findInRun(clock: number): number {
    const read = this.#starts.length;
    return read === this.#runStart || clock < this.#starts[this.#runStart]! ? -1 : this.#search(this.#runStart, read - 1, clock);
  }

  /** The last struct in [low, high] starting at or before `clock` (the first starts at or before it). */
  #search(low: number, high: number, clock: number): number {
    const starts = this.#starts;
    while (low < high) {
      const mid = (low + high + 1) >>> 1;
      if (starts[mid]! <= clock) low = mid;
      else high = mid - 1;
    }
    return low;
  }
}
