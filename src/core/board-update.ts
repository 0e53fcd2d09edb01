/**
 * Board updates: the one rule for what a Yjs update may hold before the sync server stores it or a client
 * applies it. It reads the update v1 wire format itself (varuints, strings, structs, the ten content
 * kinds, lib0's `writeAny` values, the delete set), so the core needs no Yjs, and it never builds a
 * Y.Doc: the work is linear in the bytes, values nest at most {@link MAX_JSON_DEPTH} deep, and the
 * first problem ends the read. It accepts exactly the updates Yjs writes (`Y.encodeStateAsUpdate`, an
 * `update` event, `Y.mergeUpdates` of such updates) that keep a board JSON; it refuses what a client
 * must not apply, what could make `Y.mergeUpdates` or `Y.applyUpdate` loop or throw, and what is over
 * the limits. It owns the name of the blackboard map; it does not decode base64 or speak HTTP.
 *
 * What the update alone shows, and what it does not. An item that names its parent (a root type by
 * name, or a nested type by id) shows where it goes. An item with an origin (the item left of it when
 * it was written) or a right origin takes its parent and map key from that item when applied: an
 * overwrite of a blackboard key is such an item, its origin the value it replaces. When that item is in
 * the same update, the chain is followed there (an item whose origin lands on a blackboard-map item is
 * one too, and is checked as one). When it is not, the update does not say where the item goes: a
 * caller holding the document passes {@link BoardUpdateCheck.blackboardKeyAt} to look it up there (the
 * client's tab sync does). The server keeps no document, and a client checks a pulled page before it
 * opens the boards, as the server checks a push: an overwrite of an existing key with a Y.Text passes
 * both. Nor does any check see an item that reuses an id the document already holds: Yjs keeps the one
 * it had and skips the other, and items whose origin is that id go where the kept one is.
 */
import { MAX_JSON_DEPTH, findJsonProblem, findKeyProblem } from './json.js';

/** The name of the Y.Map that holds the blackboard in each session's Y.Doc. */
export const BLACKBOARD_MAP = 'blackboard';

/** Limits of one board update. */
export interface BoardUpdateLimits {
  /** Largest update, in bytes. @default 524288 (512 KiB) */
  readonly maxBytes: number;
  /**
   * Most structs (items, GC and skip runs) plus delete-set ranges in one update. Legitimate updates
   * take 10 bytes or more each (measured: map overwrites, texts edited at random, with and without GC),
   * so about 53 000 at the byte limit; this refuses updates four times denser. @default 131072
   */
  readonly maxStructs: number;
}

/** The limits a push's board update is held to unless the server is told otherwise (`SyncLimits`). */
export const DEFAULT_BOARD_UPDATE_LIMITS: BoardUpdateLimits = Object.freeze({ maxBytes: 512 * 1024, maxStructs: 131_072 });

/**
 * No size limits: the wire rules only. For updates whose size is not the reader's to bound: a tab's sync
 * step 2 carries the whole board, and a compacted server row holds many pushes.
 */
export const NO_BOARD_UPDATE_LIMITS: BoardUpdateLimits = Object.freeze({ maxBytes: Number.POSITIVE_INFINITY, maxStructs: Number.POSITIVE_INFINITY });

/** What {@link findBoardUpdateProblem} checks an update against. */
export interface BoardUpdateCheck extends BoardUpdateLimits {
  /**
   * Where the item with id (client, clock) of the document the update is for lives, for an origin the
   * update names but does not hold: its key when it is an item of the blackboard map, null when it is
   * anything else, undefined when the document does not hold it. Absent: such origins are not followed.
   */
  readonly blackboardKeyAt?: (client: number, clock: number) => string | null | undefined;
}

/** Why an update is refused. */
export interface BoardUpdateProblem {
  /**
   * `malformed`: it is not a Yjs update Yjs reads back safely (it does not decode, has bytes after its
   * delete set, or has a clock or length past `Number.MAX_SAFE_INTEGER`); `refused`: it decodes, but would
   * put a subdocument in the doc or something other than JSON in the blackboard map; `too-large`: over
   * a {@link BoardUpdateLimits} limit.
   */
  readonly kind: 'malformed' | 'refused' | 'too-large';
  /** The reason, a clause starting with "it" or "key" (`key "k" would hold ContentType, not a JSON value`). */
  readonly message: string;
}

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
 *   rules ({@link findJsonProblem}, {@link findKeyProblem}); other roots may hold any other content;
 * - values of any root nested at most {@link MAX_JSON_DEPTH} deep;
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

/** Thrown inside the reader to end it with a problem; caught by {@link findBoardUpdateProblem}. */
class Stop extends Error {
  constructor(readonly problem: BoardUpdateProblem) {
    super(problem.message);
  }
}

const MAX = Number.MAX_SAFE_INTEGER;
const CONTENT_NAMES = ['', 'ContentDeleted', 'ContentJSON', 'ContentBinary', 'ContentString', 'ContentEmbed', 'ContentFormat', 'ContentType', 'ContentAny', 'ContentDoc'] as const;
const REF_DELETED = 1;
const REF_ANY = 8;
const REF_DOC = 9;
const INFO_SKIP = 10;
const BIT_ORIGIN = 0x80;
const BIT_RIGHT = 0x40;
const BIT_SUB = 0x20;
// A struct's tag: these for a GC run, a skip, an item of another parent, an item of the blackboard map;
// 0 and up, the index of an item whose parent comes from an origin (see `deferred`).
const TAG_GC = -1;
const TAG_SKIP = -2;
const TAG_OTHER = -3;
const TAG_BOARD = -4;
const BLACKBOARD_BYTES = [...BLACKBOARD_MAP].map((char) => char.charCodeAt(0));

const DOC_REFUSED = 'it holds a subdocument (ContentDoc), which boards do not hold: each one is a Y.Doc built as the update is read';

/** An update Yjs cannot read. */
function malformed(at: number, what: string): Stop {
  return new Stop({ kind: 'malformed', message: `it does not decode as a Yjs update (${what}, at byte ${at})` });
}

/** An update Yjs reads but never writes, and mishandles: `what` says how. */
function unlike(at: number, what: string): Stop {
  return new Stop({ kind: 'malformed', message: `it is not an update Yjs writes (${what}, at byte ${at})` });
}

/** A number past the bound. */
function unsafe(at: number, what: string): Stop {
  return new Stop({
    kind: 'malformed',
    message: `it holds ${what}, past Number.MAX_SAFE_INTEGER (at byte ${at}), where Yjs's clock arithmetic rounds and Y.mergeUpdates can loop forever`,
  });
}

function refused(message: string): Stop {
  return new Stop({ kind: 'refused', message });
}

/** The items whose parent and key come from an origin read later in the update, column by column (NaN: no such origin). */
interface Deferred {
  readonly originClient: number[];
  readonly originClock: number[];
  readonly rightClient: number[];
  readonly rightClock: number[];
  readonly ref: number[];
  readonly contentAt: number[];
}

class UpdateReader {
  readonly #bytes: Uint8Array;
  readonly #check: BoardUpdateCheck;
  #pos = 0;
  #view: DataView | undefined;
  /** The blackboard key whose value is being read, for messages; null outside one. */
  #key: string | null = null;
  #count = 0;
  // Every struct: its first clock and tag; for an item of the blackboard map, its key.
  readonly #starts: number[] = [];
  readonly #tags: number[] = [];
  readonly #keys = new Map<number, string>();
  // Every client's run read so far: client → [index of its first struct, of its last, the clock after it].
  readonly #runs = new Map<number, [number, number, number]>();
  /** The first struct of the client being read. */
  #runStart = 0;
  readonly #deferred: Deferred = { originClient: [], originClock: [], rightClient: [], rightClock: [], ref: [], contentAt: [] };

  constructor(bytes: Uint8Array, check: BoardUpdateCheck) {
    this.#bytes = bytes;
    this.#check = check;
  }

  read(): void {
    this.#structs();
    this.#followOrigins();
    this.#deleteSet();
    const rest = this.#bytes.length - this.#pos;
    if (rest !== 0) throw unlike(this.#pos, `${rest} byte${rest === 1 ? '' : 's'} after the delete set`);
  }

  #counted(): void {
    if (++this.#count > this.#check.maxStructs) {
      throw new Stop({ kind: 'too-large', message: `it holds more than ${this.#check.maxStructs} structs and deleted ranges, the limit for one board update` });
    }
  }

  #structs(): void {
    const clients = this.#uint('a client count');
    let previous = Number.POSITIVE_INFINITY;
    for (let c = 0; c < clients; c++) {
      const at = this.#pos;
      const count = this.#uint('a struct count');
      const client = this.#uint('a client id');
      if (count === 0) throw unlike(at, `client ${client} with no structs`);
      if (client >= previous) throw unlike(at, `client ${client} after client ${previous}: clients come once each, in descending order`);
      previous = client;
      let clock = this.#uint('a clock');
      this.#runStart = this.#starts.length;
      for (let s = 0; s < count; s++) clock = this.#struct(client, clock);
      this.#runs.set(client, [this.#runStart, this.#starts.length - 1, clock]);
    }
  }

  /** Reads one struct of `client` starting at `clock`; returns the clock after it. */
  #struct(client: number, clock: number): number {
    this.#counted();
    const bytes = this.#bytes;
    const at = this.#pos;
    if (at >= bytes.length) throw malformed(at, 'the update ends before a struct');
    const info = bytes[this.#pos++]!;
    const index = this.#starts.length;
    let tag: number;
    let length: number;
    if (info === INFO_SKIP || info === 0) {
      tag = info === 0 ? TAG_GC : TAG_SKIP;
      length = this.#uint('a struct length');
    } else {
      const ref = info & 0x1f;
      if (ref === 0) throw unlike(at, `struct info ${info}, a GC run with flags`);
      if (ref > REF_DOC) throw malformed(at, `struct info ${info}, which names no content`);
      // The blackboard key this item writes: null when it writes none, undefined while that is not known
      // (an item whose origin is in a client run further on).
      let key: string | null | undefined;
      if ((info & (BIT_ORIGIN | BIT_RIGHT)) === 0) {
        const parentInfo = this.#uint('a parent kind');
        let board = false;
        if (parentInfo === 1) {
          board = this.#rootIsBlackboard();
        } else if (parentInfo === 0) {
          const parentClient = this.#uint('a parent client');
          const parentClock = this.#uint('a parent clock');
          if (parentClient === client && parentClock >= clock) throw unlike(at, `an item at clock ${clock} whose parent is not before it, which Y.applyUpdate throws on half-way`);
        } else {
          throw unlike(at, `parent kind ${parentInfo}`);
        }
        const keyAt = (info & BIT_SUB) === 0 ? -1 : this.#pos;
        if (keyAt >= 0 && !board) this.#skipString();
        if (ref === REF_DOC) throw refused(DOC_REFUSED);
        if (board) {
          if (keyAt < 0) throw refused('it inserts into the blackboard map as if it were a list');
          key = this.#readString();
          const keyProblem = findKeyProblem(key);
          if (keyProblem) throw refused(`it writes the blackboard key ${JSON.stringify(key)}: ${keyProblem}`);
        } else key = null;
      } else {
        let originClient = Number.NaN;
        let originClock = Number.NaN;
        let rightClient = Number.NaN;
        let rightClock = Number.NaN;
        if ((info & BIT_ORIGIN) !== 0) {
          originClient = this.#uint('an origin client');
          originClock = this.#uint('an origin clock');
          if (originClient === client && originClock >= clock) throw unlike(at, `an item at clock ${clock} whose origin is not before it, which Y.applyUpdate throws on half-way`);
        }
        if ((info & BIT_RIGHT) !== 0) {
          rightClient = this.#uint('a right origin client');
          rightClock = this.#uint('a right origin clock');
          if (rightClient === client && rightClock >= clock) throw unlike(at, `an item at clock ${clock} whose right origin is not before it, which Y.applyUpdate throws on half-way`);
        }
        if (ref === REF_DOC) throw refused(DOC_REFUSED);
        const left = this.#keyOf(client, originClient, originClock);
        const right = this.#keyOf(client, rightClient, rightClock);
        key = typeof left === 'string' ? left : typeof right === 'string' ? right : left === undefined || right === undefined ? undefined : null;
        if (key === undefined) {
          const deferred = this.#deferred;
          deferred.originClient.push(originClient);
          deferred.originClock.push(originClock);
          deferred.rightClient.push(rightClient);
          deferred.rightClock.push(rightClock);
          deferred.ref.push(ref);
          deferred.contentAt.push(this.#pos);
        }
      }
      if (typeof key === 'string') {
        tag = TAG_BOARD;
        this.#keys.set(index, key);
        length = this.#boardValue(ref, key);
      } else {
        tag = key === null ? TAG_OTHER : this.#deferred.ref.length - 1;
        length = this.#content(ref);
      }
    }
    if (length === 0) throw unlike(at, `a struct of length 0 at clock ${clock}, which makes Y.applyUpdate drop what follows it`);
    const end = clock + length;
    if (end > MAX) throw unsafe(at, `a struct at clock ${clock} of length ${length}, which ends`);
    this.#starts.push(clock);
    this.#tags.push(tag);
    return end;
  }

  /**
   * For an origin (NaN: none) of an item of `client`, where the item it names lives as far as is known
   * now: its blackboard key, null when it is elsewhere (or nowhere to be found), undefined when it may
   * be in a client run not read yet (clients come in descending order), or is an item still unresolved.
   * An origin the update does not hold is looked up in the document, when there is one.
   */
  #keyOf(client: number, originClient: number, originClock: number): string | null | undefined {
    if (Number.isNaN(originClient)) return null;
    let struct: number;
    if (originClient === client) {
      // The item's own client: the origin is before it (checked), in the structs read so far or before the run.
      const read = this.#starts.length;
      struct = read === this.#runStart || originClock < this.#starts[this.#runStart]! ? -1 : this.#search(this.#runStart, read - 1, originClock);
    } else if (originClient > client) {
      struct = this.#find(originClient, originClock);
    } else {
      return undefined;
    }
    return this.#keyAtStruct(struct, originClient, originClock);
  }

  /** What {@link #keyOf} says of the struct `struct` of this update (-1: none) holding id (client, clock). */
  #keyAtStruct(struct: number, client: number, clock: number): string | null | undefined {
    const tag = struct < 0 ? TAG_SKIP : this.#tags[struct]!;
    if (tag === TAG_BOARD) return this.#keys.get(struct);
    if (tag >= 0) return undefined;
    if (tag === TAG_SKIP) return this.#check.blackboardKeyAt?.(client, clock) ?? null;
    return null;
  }

  /** Reads a root name; true when it is the blackboard map's (compared as bytes: nothing is decoded). */
  #rootIsBlackboard(): boolean {
    const length = this.#uint('a string length');
    const start = this.#pos;
    this.#skip(length, 'a string');
    if (utf16Length(this.#bytes, start, start + length) < 0) throw malformed(start, 'a string that is not UTF-8');
    return length === BLACKBOARD_BYTES.length && this.#bytesEqual(start, BLACKBOARD_BYTES);
  }

  #bytesEqual(from: number, expected: readonly number[]): boolean {
    for (let i = 0; i < expected.length; i++) if (this.#bytes[from + i] !== expected[i]) return false;
    return true;
  }

  /** Reads (building them) the values of an item under blackboard `key`, refusing any that is not JSON; returns their count. */
  #boardValue(ref: number, key: string): number {
    if (ref === REF_DELETED) return this.#content(ref);
    if (ref !== REF_ANY) throw refused(`key ${JSON.stringify(key)} would hold ${CONTENT_NAMES[ref]}, not a JSON value`);
    this.#key = key;
    const count = this.#uint('a value count');
    for (let i = 0; i < count; i++) {
      const problem = findJsonProblem(this.#any(true, 0));
      if (problem) throw refused(`key ${JSON.stringify(key)} would hold a value that is not JSON (${problem.message})`);
    }
    this.#key = null;
    return count;
  }

  /**
   * Resolves the items whose origin was read after them (another client's run later in the update),
   * through the update (and the document, with `blackboardKeyAt`), and checks the content of those that
   * land in the blackboard map. An item lands there when its origin or right origin does (either, to be
   * safe: Yjs takes the left one's parent, and a legitimate item's two neighbours share it). A GC run as
   * a neighbour means the item is dropped; a neighbour of another parent leaves it there.
   */
  #followOrigins(): void {
    const deferred = this.#deferred;
    const n = deferred.ref.length;
    if (n === 0) return;
    const keyOf: (string | undefined)[] = new Array<string | undefined>(n);
    // Edges from a deferred item to the deferred items that take their parent from it.
    const head = new Int32Array(n).fill(-1);
    const next: number[] = [];
    const target: number[] = [];
    const queue: number[] = [];
    const link = (d: number, client: number, clock: number): void => {
      if (Number.isNaN(client) || keyOf[d] !== undefined) return;
      const struct = this.#find(client, clock);
      const tag = struct < 0 ? TAG_SKIP : this.#tags[struct]!;
      if (tag >= 0) {
        next.push(head[tag]!);
        target.push(d);
        head[tag] = next.length - 1;
        return;
      }
      const key = this.#keyAtStruct(struct, client, clock);
      if (typeof key === 'string') {
        keyOf[d] = key;
        queue.push(d);
      }
    };
    for (let d = 0; d < n; d++) {
      link(d, deferred.originClient[d]!, deferred.originClock[d]!);
      link(d, deferred.rightClient[d]!, deferred.rightClock[d]!);
    }
    for (let q = 0; q < queue.length; q++) {
      const from = queue[q]!;
      for (let edge = head[from]!; edge >= 0; edge = next[edge]!) {
        const d = target[edge]!;
        if (keyOf[d] !== undefined) continue;
        keyOf[d] = keyOf[from];
        queue.push(d);
      }
    }
    // In update order, so the first bad item is the one named.
    queue.sort((a, b) => a - b);
    const end = this.#pos;
    for (const d of queue) {
      this.#pos = deferred.contentAt[d]!;
      this.#boardValue(deferred.ref[d]!, keyOf[d]!);
    }
    this.#pos = end;
  }

  /** The index of the struct of this update (of a run read to its end) holding id (client, clock), or -1 when none does. */
  #find(client: number, clock: number): number {
    const run = this.#runs.get(client);
    if (run === undefined || clock < this.#starts[run[0]]! || clock >= run[2]) return -1;
    return this.#search(run[0], run[1], clock);
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

  #deleteSet(): void {
    const clients = this.#uint('a deleted client count');
    for (let c = 0; c < clients; c++) {
      this.#uint('a deleted client id');
      const ranges = this.#uint('a deleted range count');
      for (let r = 0; r < ranges; r++) {
        this.#counted();
        const at = this.#pos;
        const clock = this.#uint('a deleted clock');
        const length = this.#uint('a deleted length');
        if (length === 0) throw unlike(at, `a deleted range of length 0 at clock ${clock}`);
        if (clock + length > MAX) throw unsafe(at, `a deleted range at clock ${clock} of length ${length}, which ends`);
      }
    }
  }

  /** Reads content `ref` (not ContentDoc) without building it; returns its length, as Yjs counts it. */
  #content(ref: number): number {
    switch (ref) {
      case 1: // ContentDeleted
        return this.#uint('a deleted length');
      case 2: {
        // ContentJSON (written by Yjs before v13.5): each value a JSON text or "undefined".
        const count = this.#uint('a value count');
        for (let i = 0; i < count; i++) {
          const at = this.#pos;
          const text = this.#readString();
          if (text !== 'undefined') this.#parseJson(text, at);
        }
        return count;
      }
      case 3: // ContentBinary
        this.#skip(this.#uint('a binary length'), 'binary content');
        return 1;
      case 4: // ContentString: its length is the string's in UTF-16 code units
        return this.#skipString();
      case 5: {
        // ContentEmbed
        const at = this.#pos;
        this.#parseJson(this.#readString(), at);
        return 1;
      }
      case 6: {
        // ContentFormat: a key and a JSON value
        this.#skipString();
        const at = this.#pos;
        this.#parseJson(this.#readString(), at);
        return 1;
      }
      case 7: {
        // ContentType: Y.Array, Y.Map, Y.Text, Y.XmlElement (+ node name), Y.XmlFragment, Y.XmlHook (+ name), Y.XmlText
        const at = this.#pos;
        const type = this.#uint('a type');
        if (type > 6) throw malformed(at, `type ${type}, which names no shared type`);
        if (type === 3 || type === 5) this.#skipString();
        return 1;
      }
      default: {
        // ContentAny
        const count = this.#uint('a value count');
        for (let i = 0; i < count; i++) this.#any(false, 0);
        return count;
      }
    }
  }

  #parseJson(text: string, at: number): void {
    try {
      JSON.parse(text);
    } catch {
      throw malformed(at, 'a JSON value that does not parse');
    }
  }

  /**
   * Reads one value of lib0's `writeAny` encoding, `depth` arrays and objects deep; returns it built
   * (object keys `__proto__` as own keys, so the JSON check sees them) when `build`, else undefined.
   */
  #any(build: boolean, depth: number): unknown {
    const bytes = this.#bytes;
    const at = this.#pos;
    if (at >= bytes.length) throw malformed(at, 'the update ends before a value');
    const type = bytes[this.#pos++]!;
    switch (type) {
      case 127:
        return undefined;
      case 126:
        return null;
      case 125:
        return this.#varInt();
      case 124:
        this.#skip(4, 'a float32');
        return build ? this.#dataView().getFloat32(at + 1) : undefined;
      case 123:
        this.#skip(8, 'a float64');
        return build ? this.#dataView().getFloat64(at + 1) : undefined;
      case 122:
        this.#skip(8, 'a bigint');
        return build ? this.#dataView().getBigInt64(at + 1) : undefined;
      case 121:
        return false;
      case 120:
        return true;
      case 119:
        if (!build) {
          this.#skipString();
          return undefined;
        }
        return this.#readString();
      case 118: {
        const size = this.#uint('an object size');
        this.#nest(depth, at);
        if (!build) {
          for (let i = 0; i < size; i++) {
            this.#skipString();
            this.#any(false, depth + 1);
          }
          return undefined;
        }
        const object: Record<string, unknown> = {};
        for (let i = 0; i < size; i++) {
          const key = this.#readString();
          const value = this.#any(true, depth + 1);
          // lib0 assigns, which for "__proto__" replaces the prototype; an own key lets the JSON check refuse it.
          if (key === '__proto__') Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
          else object[key] = value;
        }
        return object;
      }
      case 117: {
        const length = this.#uint('an array length');
        this.#nest(depth, at);
        const array: unknown[] | undefined = build ? [] : undefined;
        for (let i = 0; i < length; i++) {
          const value = this.#any(build, depth + 1);
          array?.push(value);
        }
        return array;
      }
      case 116: {
        const length = this.#uint('a byte array length');
        const start = this.#pos;
        this.#skip(length, 'a byte array');
        return build ? bytes.subarray(start, start + length) : undefined;
      }
      default:
        throw malformed(at, `value type ${type}`);
    }
  }

  #nest(depth: number, at: number): void {
    if (depth < MAX_JSON_DEPTH) return;
    const what = `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;
    if (this.#key !== null) throw refused(`key ${JSON.stringify(this.#key)} would hold a value that is not JSON (${what})`);
    throw refused(`it holds a value ${what} (at byte ${at})`);
  }

  #dataView(): DataView {
    return (this.#view ??= new DataView(this.#bytes.buffer, this.#bytes.byteOffset, this.#bytes.byteLength));
  }

  #skip(length: number, what: string): void {
    if (this.#pos + length > this.#bytes.length) throw malformed(this.#pos, `${what} runs past the end`);
    this.#pos += length;
  }

  /** A varuint as lib0 writes it (at most 8 bytes here, within Number.MAX_SAFE_INTEGER). */
  #uint(what: string): number {
    const bytes = this.#bytes;
    let pos = this.#pos;
    if (pos < bytes.length && bytes[pos]! < 0x80) {
      this.#pos = pos + 1;
      return bytes[pos]!;
    }
    const at = pos;
    let value = 0;
    let multiplier = 1;
    for (let i = 0; i < 8; i++) {
      if (pos >= bytes.length) throw malformed(at, `the update ends inside ${what}`);
      const byte = bytes[pos++]!;
      value += (byte & 0x7f) * multiplier;
      if (byte < 0x80) {
        if (value > MAX) throw unsafe(at, `${what} of ${value}`);
        this.#pos = pos;
        return value;
      }
      multiplier *= 128;
    }
    throw unlike(at, `${what} longer than 8 bytes`);
  }

  /** A signed varint as lib0 writes it: 6 bits, a sign bit and a continuation bit first, then 7 bits a byte. */
  #varInt(): number {
    const bytes = this.#bytes;
    const at = this.#pos;
    if (at >= bytes.length) throw malformed(at, 'the update ends inside an integer');
    let byte = bytes[this.#pos++]!;
    let value = byte & 0x3f;
    const sign = (byte & 0x40) !== 0 ? -1 : 1;
    let multiplier = 64;
    for (let i = 1; (byte & 0x80) !== 0; i++) {
      if (i === 8) throw unlike(at, 'an integer longer than 8 bytes');
      if (this.#pos >= bytes.length) throw malformed(at, 'the update ends inside an integer');
      byte = bytes[this.#pos++]!;
      value += (byte & 0x7f) * multiplier;
      multiplier *= 128;
    }
    if (value > MAX) throw unsafe(at, `an integer of ${value}`);
    return sign * value;
  }

  /** Skips a varstring, checking it is UTF-8 (as lib0's fatal TextDecoder does); returns its length in UTF-16 code units. */
  #skipString(): number {
    const length = this.#uint('a string length');
    const start = this.#pos;
    this.#skip(length, 'a string');
    const units = utf16Length(this.#bytes, start, start + length);
    if (units < 0) throw malformed(start, 'a string that is not UTF-8');
    return units;
  }

  #readString(): string {
    const length = this.#uint('a string length');
    const start = this.#pos;
    this.#skip(length, 'a string');
    const text = decodeUtf8(this.#bytes, start, start + length);
    if (text === null) throw malformed(start, 'a string that is not UTF-8');
    return text;
  }
}

/**
 * The UTF-16 length of the UTF-8 bytes [start, end), or -1 when they are not UTF-8 as the WHATWG decoder
 * in fatal mode reads it (no overlong forms, surrogates, code points past U+10FFFF or cut sequences).
 */
function utf16Length(bytes: Uint8Array, start: number, end: number): number {
  let units = 0;
  let i = start;
  while (i < end) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      units++;
      continue;
    }
    const size = sequenceSize(bytes, i, end);
    if (size < 0) return -1;
    i += size;
    units += size === 4 ? 2 : 1;
  }
  return units;
}

/** The length of the UTF-8 sequence of 2–4 bytes starting at `i`, or -1 when it is not one. */
function sequenceSize(bytes: Uint8Array, i: number, end: number): number {
  const lead = bytes[i]!;
  let size: number;
  let low = 0x80;
  let high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) size = 2;
  else if (lead >= 0xe0 && lead <= 0xef) {
    size = 3;
    if (lead === 0xe0) low = 0xa0;
    else if (lead === 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    size = 4;
    if (lead === 0xf0) low = 0x90;
    else if (lead === 0xf4) high = 0x8f;
  } else return -1;
  if (i + size > end) return -1;
  const second = bytes[i + 1]!;
  if (second < low || second > high) return -1;
  for (let k = 2; k < size; k++) {
    const next = bytes[i + k]!;
    if (next < 0x80 || next > 0xbf) return -1;
  }
  return size;
}

/** The UTF-8 bytes [start, end) as a string, or null when they are not UTF-8 (see {@link utf16Length}). */
function decodeUtf8(bytes: Uint8Array, start: number, end: number): string | null {
  let ascii = true;
  for (let i = start; i < end; i++) {
    if (bytes[i]! >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return charCodes(bytes.subarray(start, end));
  const units: number[] = [];
  let i = start;
  while (i < end) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      units.push(lead);
      i++;
      continue;
    }
    const size = sequenceSize(bytes, i, end);
    if (size < 0) return null;
    let point = lead & (size === 2 ? 0x1f : size === 3 ? 0x0f : 0x07);
    for (let k = 1; k < size; k++) point = (point << 6) | (bytes[i + k]! & 0x3f);
    if (point > 0xffff) {
      point -= 0x10000;
      units.push(0xd800 + (point >> 10), 0xdc00 + (point & 0x3ff));
    } else units.push(point);
    i += size;
  }
  return charCodes(units);
}

/** The string of these UTF-16 code units (String.fromCharCode in slices: an argument list has a size limit). */
function charCodes(units: ArrayLike<number>): string {
  const length = units.length;
  if (length <= 32) {
    // Short strings (keys, mostly) build fastest one unit at a time.
    let text = '';
    for (let i = 0; i < length; i++) text += String.fromCharCode(units[i]!);
    return text;
  }
  const slice = 8192;
  let text = '';
  for (let i = 0; i < length; i += slice) {
    text += String.fromCharCode.apply(null, Array.prototype.slice.call(units, i, Math.min(length, i + slice)) as number[]);
  }
  return text;
}
