/**
 * The walk over a whole update, and {@link findBoardUpdateProblem}, which runs it: the client runs and
 * their structs (GC runs, skips, items), the delete set, and nothing after it, each clock, length and
 * client order held to what Yjs writes, and the count of structs and ranges to the limit. Where each item
 * goes and what it may write there are the board rules' (board-map.ts); reading content is content.ts's.
 */
import type { BoardUpdateCheck, BoardUpdateProblem } from './check.js';
import { BoardMap } from './board-map.js';
import { ByteReader } from './bytes.js';
import { REF_DOC, readContent } from './content.js';
import { Stop, malformed, unlike, unsafe } from './problem.js';
import { StructIndex, TAG_BOARD, TAG_GC, TAG_OTHER, TAG_SKIP } from './struct-index.js';

const MAX = Number.MAX_SAFE_INTEGER;
const INFO_SKIP = 10;

/**
 * Why `update` (Yjs update format v1) must not be stored or applied to a board, or null when it may.
 * Besides decoding completely (and nothing after its delete set), an update must keep:
 * - every clock, length and clock + length within `Number.MAX_SAFE_INTEGER`. `Y.mergeUpdates` computes
 *   the gap before a struct as `(clock - c) - l` after the client's previous struct (c, l) and extends a
 *   skip to `clock + length`; past 2^53 doubles are at least 2 apart, those sums round, and when both
 *   end short of `clock` the merge extends the same skip to the same end forever (a zero-length struct at
 *   clock 2^53 + 2 after a struct at 0 of length 1 does: 14 bytes). Within the bound all that arithmetic
 *   is exact;
 * - no struct of length 0, no client twice and clients in descending order, as Yjs writes them (a
 *   second run of a client replaces the first when applied; a zero-length struct drops what follows);
 * - origins and parents of an item that name its own client before it (`Y.applyUpdate` throws half-way
 *   otherwise);
 * - no subdocument (ContentDoc) anywhere: each would be a whole Y.Doc built while decoding;
 * - in the blackboard map only keyed items whose content is deleted or JSON values, by the core's
 *   rules (`findJsonProblem`, `findKeyProblem`); other roots may hold any other content;
 * - values of any root nested at most `MAX_JSON_DEPTH` deep;
 * - the sizes in `check`.
 */
export function findBoardUpdateProblem(update: Uint8Array, check: BoardUpdateCheck): BoardUpdateProblem | null {
  if (update.byteLength > check.maxBytes) {
    return { kind: 'too-large', message: `it is ${update.byteLength} bytes, over the limit of ${check.maxBytes} for one board update` };
  }
  try {
    new UpdateReader(update, check).read();
    return null;
  } catch (error) {
    if (error instanceof Stop) return error.problem;
    throw error;
  }
}

class UpdateReader {
  readonly #reader: ByteReader;
  readonly #check: BoardUpdateCheck;
  readonly #index = new StructIndex();
  readonly #board: BoardMap;
  #count = 0;

  constructor(bytes: Uint8Array, check: BoardUpdateCheck) {
    this.#reader = new ByteReader(bytes);
    this.#check = check;
    this.#board = new BoardMap(this.#reader, this.#index, check);
  }

  read(): void {
    this.#structs();
    this.#board.followOrigins();
    this.#deleteSet();
    const rest = this.#reader.left;
    if (rest !== 0) throw unlike(this.#reader.pos, `${rest} byte${rest === 1 ? '' : 's'} after the delete set`);
  }

  #counted(): void {
    if (++this.#count > this.#check.maxStructs) {
      throw new Stop({ kind: 'too-large', message: `it holds more than ${this.#check.maxStructs} structs and deleted ranges, the limit for one board update` });
    }
  }

  #structs(): void {
    const reader = this.#reader;
    const clients = reader.uint('a client count');
    let previous = Number.POSITIVE_INFINITY;
    for (let c = 0; c < clients; c++) {
      const at = reader.pos;
      const count = reader.uint('a struct count');
      const client = reader.uint('a client id');
      if (count === 0) throw unlike(at, `client ${client} with no structs`);
      if (client >= previous) throw unlike(at, `client ${client} after client ${previous}: clients come once each, in descending order`);
      previous = client;
      let clock = reader.uint('a clock');
      this.#index.beginRun();
      for (let s = 0; s < count; s++) clock = this.#struct(client, clock);
      this.#index.endRun(client, clock);
    }
  }

  /** Reads one struct of `client` starting at `clock`; returns the clock after it. */
  #struct(client: number, clock: number): number {
    this.#counted();
    const reader = this.#reader;
    const at = reader.pos;
    const info = reader.byte('a struct');
    let tag: number;
    let length: number;
    if (info === INFO_SKIP || info === 0) {
      tag = info === 0 ? TAG_GC : TAG_SKIP;
      length = reader.uint('a struct length');
    } else {
      const ref = info & 0x1f;
      if (ref === 0) throw unlike(at, `struct info ${info}, a GC run with flags`);
      if (ref > REF_DOC) throw malformed(at, `struct info ${info}, which names no content`);
      // The blackboard key this item writes: null when it writes none, undefined while that is not known
      // (an item whose origin is in a client run further on).
      const key = this.#board.place(client, clock, info, at);
      if (typeof key === 'string') {
        tag = TAG_BOARD;
        length = this.#board.value(ref, key);
      } else {
        tag = key === null ? TAG_OTHER : this.#board.deferredCount - 1;
        length = readContent(reader, ref);
      }
    }
    if (length === 0) throw unlike(at, `a struct of length 0 at clock ${clock}, which makes Y.applyUpdate drop what follows it`);
    const end = clock + length;
    if (end > MAX) throw unsafe(at, `a struct at clock ${clock} of length ${length}, which ends`);
    this.#index.add(clock, tag);
    return end;
  }

  #deleteSet(): void {
    const reader = this.#reader;
    const clients = reader.uint('a deleted client count');
    for (let c = 0; c < clients; c++) {
      reader.uint('a deleted client id');
      const ranges = reader.uint('a deleted range count');
      for (let r = 0; r < ranges; r++) {
        this.#counted();
        const at = reader.pos;
        const clock = reader.uint('a deleted clock');
        const length = reader.uint('a deleted length');
        if (length === 0) throw unlike(at, `a deleted range of length 0 at clock ${clock}`);
        if (clock + length > MAX) throw unsafe(at, `a deleted range at clock ${clock} of length ${length}, which ends`);
      }
    }
  }
}
