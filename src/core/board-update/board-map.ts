/**
 * The blackboard map's rules, applied to each item as the walk reads it: where the item goes (the parent
 * it names, or the origins it takes its parent and key from), which blackboard key it writes, and that
 * what it writes there is a JSON value or deleted; and no subdocument anywhere. An item whose origin is
 * in a client run read later waits until the walk has read every run, then {@link BoardMap.followOrigins}
 * places it. This module owns the name of the blackboard map. It does not read content kinds (content.ts)
 * or `any` values (any.ts), walk the runs or bound clocks and lengths (walk.ts), or say what JSON is (json.ts).
 */
import { findJsonProblem, findKeyProblem } from '../json.js';
import { buildAny } from './any.js';
import type { ByteReader } from './bytes.js';
import type { BoardUpdateCheck } from './check.js';
import { CONTENT_NAMES, REF_ANY, REF_DELETED, REF_DOC, readContent } from './content.js';
import { refused, unlike } from './problem.js';
import { TAG_BOARD, TAG_SKIP, type StructIndex } from './struct-index.js';

/** The name of the Y.Map that holds the blackboard in each session's Y.Doc. */
export const BLACKBOARD_MAP = 'blackboard';

const BLACKBOARD_BYTES = [...BLACKBOARD_MAP].map((char) => char.charCodeAt(0));
const BIT_ORIGIN = 0x80;
const BIT_RIGHT = 0x40;
const BIT_SUB = 0x20;

const DOC_REFUSED = 'it holds a subdocument (ContentDoc), which boards do not hold: each one is a Y.Doc built as the update is read';

/** The items whose parent and key come from an origin read later in the update, column by column (NaN: no such origin). */
interface Deferred {
  readonly originClient: number[];
  readonly originClock: number[];
  readonly rightClient: number[];
  readonly rightClock: number[];
  readonly ref: number[];
  readonly contentAt: number[];
}

/** The blackboard map as one update writes it, checked item by item. */
export class BoardMap {
  readonly #reader: ByteReader;
  readonly #index: StructIndex;
  readonly #check: BoardUpdateCheck;
  // For every struct that is an item of the blackboard map: its key.
  readonly #keys = new Map<number, string>();
  readonly #deferred: Deferred = { originClient: [], originClock: [], rightClient: [], rightClock: [], ref: [], contentAt: [] };

  constructor(reader: ByteReader, index: StructIndex, check: BoardUpdateCheck) {
    this.#reader = reader;
    this.#index = index;
    this.#check = check;
  }

  /** How many items wait for {@link BoardMap.followOrigins}; the one deferred last is number `deferredCount - 1`, its struct's tag. */
  get deferredCount(): number {
    return this.#deferred.ref.length;
  }

  /**
   * Reads where the item of `client` at `clock` goes, its info byte `info` read at `at`; returns the
   * blackboard key it writes: null when it writes none, undefined while that is not known (an item whose
   * origin is in a client run further on, deferred until {@link BoardMap.followOrigins}). Its content is
   * next in the bytes, for the caller to read ({@link BoardMap.value} when it writes a key).
   */
  place(client: number, clock: number, info: number, at: number): string | null | undefined {
    const key = (info & (BIT_ORIGIN | BIT_RIGHT)) === 0 ? this.#parentKey(client, clock, info, at) : this.#originKey(client, clock, info, at);
    if (typeof key === 'string') this.#keys.set(this.#index.size, key);
    return key;
  }

  /** {@link BoardMap.place} for an item that names its parent. */
  #parentKey(client: number, clock: number, info: number, at: number): string | null {
    const reader = this.#reader;
    const parentInfo = reader.uint('a parent kind');
    let board = false;
    if (parentInfo === 1) {
      // A root type, by name: compared as bytes, nothing is decoded.
      board = reader.stringIs(BLACKBOARD_BYTES);
    } else if (parentInfo === 0) {
      const parentClient = reader.uint('a parent client');
      const parentClock = reader.uint('a parent clock');
      if (parentClient === client && parentClock >= clock) throw unlike(at, `an item at clock ${clock} whose parent is not before it, which Y.applyUpdate throws on half-way`);
    } else {
      throw unlike(at, `parent kind ${parentInfo}`);
    }
    const keyed = (info & BIT_SUB) !== 0;
    if (keyed && !board) reader.skipString();
    if ((info & 0x1f) === REF_DOC) throw refused(DOC_REFUSED);
    if (!board) return null;
    if (!keyed) throw refused('it inserts into the blackboard map as if it were a list');
    const key = reader.readString();
    const keyProblem = findKeyProblem(key);
    if (keyProblem) throw refused(`it writes the blackboard key ${JSON.stringify(key)}: ${keyProblem}`);
    return key;
  }

  /** {@link BoardMap.place} for an item with an origin or a right origin, which takes its parent from them. */
  #originKey(client: number, clock: number, info: number, at: number): string | null | undefined {
    const reader = this.#reader;
    let originClient = Number.NaN;
    let originClock = Number.NaN;
    let rightClient = Number.NaN;
    let rightClock = Number.NaN;
    if ((info & BIT_ORIGIN) !== 0) {
      originClient = reader.uint('an origin client');
      originClock = reader.uint('an origin clock');
      if (originClient === client && originClock >= clock) throw unlike(at, `an item at clock ${clock} whose origin is not before it, which Y.applyUpdate throws on half-way`);
    }
    if ((info & BIT_RIGHT) !== 0) {
      rightClient = reader.uint('a right origin client');
      rightClock = reader.uint('a right origin clock');
      if (rightClient === client && rightClock >= clock) throw unlike(at, `an item at clock ${clock} whose right origin is not before it, which Y.applyUpdate throws on half-way`);
    }
    const ref = info & 0x1f;
    if (ref === REF_DOC) throw refused(DOC_REFUSED);
    const left = this.#keyOf(client, originClient, originClock);
    const right = this.#keyOf(client, rightClient, rightClock);
    const key = typeof left === 'string' ? left : typeof right === 'string' ? right : left === undefined || right === undefined ? undefined : null;
    if (key === undefined) {
      const deferred = this.#deferred;
      deferred.originClient.push(originClient);
      deferred.originClock.push(originClock);
      deferred.rightClient.push(rightClient);
      deferred.rightClock.push(rightClock);
      deferred.ref.push(ref);
      deferred.contentAt.push(reader.pos);
    }
    return key;
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
      struct = this.#index.findInRun(originClock);
    } else if (originClient > client) {
      struct = this.#index.find(originClient, originClock);
    } else {
      return undefined;
    }
    return this.#keyAtStruct(struct, originClient, originClock);
  }

  /** What {@link BoardMap.#keyOf} says of the struct `struct` of this update (-1: none) holding id (client, clock). */
  #keyAtStruct(struct: number, client: number, clock: number): string | null | undefined {
    const tag = struct < 0 ? TAG_SKIP : this.#index.tag(struct);
    if (tag === TAG_BOARD) return this.#keys.get(struct);
    if (tag >= 0) return undefined;
    if (tag === TAG_SKIP) return this.#check.blackboardKeyAt?.(client, clock) ?? null;
    return null;
  }

  /** Reads (building them) the values of an item under blackboard `key`, refusing any that is not JSON; returns their count. */
  value(ref: number, key: string): number {
    if (ref === REF_DELETED) return readContent(this.#reader, ref);
    if (ref !== REF_ANY) throw refused(`key ${JSON.stringify(key)} would hold ${CONTENT_NAMES[ref]}, not a JSON value`);
    const count = this.#reader.uint('a value count');
    for (let i = 0; i < count; i++) {
      const problem = findJsonProblem(buildAny(this.#reader, key));
      if (problem) throw refused(`key ${JSON.stringify(key)} would hold a value that is not JSON (${problem.message})`);
    }
    return count;
  }

  /**
   * Resolves the items whose origin was read after them (another client's run later in the update),
   * through the update (and the document, with `blackboardKeyAt`), and checks the content of those that
   * land in the blackboard map. An item lands there when its origin or right origin does (either, to be
   * safe: Yjs takes the left one's parent, and a legitimate item's two neighbours share it). A GC run as
   * a neighbour means the item is dropped; a neighbour of another parent leaves it there.
   */
  followOrigins(): void {
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
      const struct = this.#index.find(client, clock);
      const tag = struct < 0 ? TAG_SKIP : this.#index.tag(struct);
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
    const reader = this.#reader;
    const end = reader.pos;
    for (const d of queue) {
      reader.seek(deferred.contentAt[d]!);
      this.value(deferred.ref[d]!, keyOf[d]!);
    }
    reader.seek(end);
  }
}
