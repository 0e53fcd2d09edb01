/**
 * Yjs updates (format v1) built byte by byte, for the tests of the board rule
 * (src/core/board-update/): what Yjs would never write, but decodes.
 * `update()` frames client runs and a delete set; `struct` and `content` make
 * their parts. Numbers past Number.MAX_SAFE_INTEGER are written from bigints.
 */
import * as encoding from 'lib0/encoding';

/** A varuint as lib0 writes it, for any non-negative integer. */
export function uint(value: number | bigint): number[] {
  let n = BigInt(value);
  const out: number[] = [];
  while (n >= 128n) {
    out.push(Number((n & 127n) | 128n));
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

/** A varstring (UTF-8) as lib0 writes it. */
export function str(text: string): number[] {
  const bytes = new TextEncoder().encode(text);
  return [...uint(bytes.length), ...bytes];
}

/** An item's content: its ref number and its bytes. */
export interface Content {
  readonly ref: number;
  readonly bytes: readonly number[];
}

function anyBytes(value: unknown): number[] {
  const encoder = encoding.createEncoder();
  encoding.writeAny(encoder, value as never);
  return [...encoding.toUint8Array(encoder)];
}

export const content = {
  deleted: (length: number): Content => ({ ref: 1, bytes: uint(length) }),
  json: (texts: readonly string[]): Content => ({ ref: 2, bytes: [...uint(texts.length), ...texts.flatMap(str)] }),
  binary: (bytes: readonly number[]): Content => ({ ref: 3, bytes: [...uint(bytes.length), ...bytes] }),
  string: (text: string): Content => ({ ref: 4, bytes: str(text) }),
  embed: (json: string): Content => ({ ref: 5, bytes: str(json) }),
  format: (key: string, json: string): Content => ({ ref: 6, bytes: [...str(key), ...str(json)] }),
  /** A shared type: 0 Y.Array, 1 Y.Map, 2 Y.Text, 3 Y.XmlElement, 4 Y.XmlFragment, 5 Y.XmlHook, 6 Y.XmlText. */
  type: (type: number, name?: string): Content => ({ ref: 7, bytes: [...uint(type), ...(name === undefined ? [] : str(name))] }),
  any: (values: readonly unknown[]): Content => ({ ref: 8, bytes: [...uint(values.length), ...values.flatMap(anyBytes)] }),
  /** Raw value bytes after the count (for what writeAny would not write). */
  anyRaw: (count: number, bytes: readonly number[]): Content => ({ ref: 8, bytes: [...uint(count), ...bytes] }),
  doc: (guid: string): Content => ({ ref: 9, bytes: [...str(guid), ...anyBytes({})] }),
};

/** Where an item goes: a root by name, a parent item by id, or its origins. */
export interface Place {
  readonly root?: string;
  readonly parent?: readonly [number, number];
  readonly key?: string;
  readonly origin?: readonly [number, number | bigint];
  readonly right?: readonly [number, number | bigint];
}

export const struct = {
  gc: (length: number | bigint): number[] => [0, ...uint(length)],
  skip: (length: number | bigint): number[] => [10, ...uint(length)],
  item(place: Place, body: Content): number[] {
    const info = body.ref | (place.origin ? 0x80 : 0) | (place.right ? 0x40 : 0) | (place.key === undefined ? 0 : 0x20);
    const out = [info];
    if (place.origin) out.push(...uint(place.origin[0]), ...uint(place.origin[1]));
    if (place.right) out.push(...uint(place.right[0]), ...uint(place.right[1]));
    if (!place.origin && !place.right) {
      if (place.root !== undefined) out.push(1, ...str(place.root));
      else out.push(0, ...uint(place.parent![0]), ...uint(place.parent![1]));
      if (place.key !== undefined) out.push(...str(place.key));
    }
    out.push(...body.bytes);
    return out;
  },
};

/** One client's run of structs, from `clock`. */
export interface Run {
  readonly client: number;
  readonly clock: number | bigint;
  readonly structs: readonly (readonly number[])[];
}

/** An update of these runs (in the order given) and delete set, then `tail`. */
export function update(runs: readonly Run[], deleted: readonly (readonly [number, readonly (readonly [number | bigint, number])[]])[] = [], tail: readonly number[] = []): Uint8Array {
  const out = [...uint(runs.length)];
  for (const run of runs) {
    out.push(...uint(run.structs.length), ...uint(run.client), ...uint(run.clock));
    for (const bytes of run.structs) for (const byte of bytes) out.push(byte);
  }
  out.push(...uint(deleted.length));
  for (const [client, ranges] of deleted) {
    out.push(...uint(client), ...uint(ranges.length));
    for (const [clock, length] of ranges) out.push(...uint(clock), ...uint(length));
  }
  out.push(...tail);
  return new Uint8Array(out);
}

/** A blackboard-map item setting `key` to `values` (ContentAny), with no origin. */
export function boardSet(key: string, values: readonly unknown[]): number[] {
  return struct.item({ root: 'blackboard', key }, content.any(values));
}

/**
 * The 14 bytes that hang `Y.mergeUpdates` with any update whose last struct of client `client` is at
 * clock 0, length 1 (a fresh doc's first map set): a GC run of length 0 at clock 2^53 + 2.
 */
export function hangUpdate(client: number): Uint8Array {
  return update([{ client, clock: 2n ** 53n + 2n, structs: [struct.gc(0)] }]);
}
