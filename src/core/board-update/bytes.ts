/**
 * The byte reader under every part of a board update: a position in the bytes, and lib0's varuints,
 * signed varints and varstrings read there, each within the bytes (a read past the end is a `malformed`
 * stop) and within `Number.MAX_SAFE_INTEGER` (past it, an `unsafe` one). It knows the encodings, not what
 * the numbers and strings mean in an update.
 */
import { malformed, unlike, unsafe } from './problem.js';
import { decodeUtf8, utf16Length } from './utf8.js';

const MAX = Number.MAX_SAFE_INTEGER;

/** Reads lib0-encoded values from `bytes`, front to back (or from a position it has passed, with {@link ByteReader.seek}). */
export class ByteReader {
  readonly #bytes: Uint8Array;
  #pos = 0;
  #view: DataView | undefined;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
  }

  /** The offset of the next byte to read. */
  get pos(): number {
    return this.#pos;
  }

  /** How many bytes are left after {@link ByteReader.pos}. */
  get left(): number {
    return this.#bytes.length - this.#pos;
  }

  /** Goes back to (or on to) `pos`, an offset read before: the caller rereads what it skipped there. */
  seek(pos: number): void {
    this.#pos = pos;
  }

  /** One byte; the update must not end before it (`what`: "a struct", "a value"). */
  byte(what: string): number {
    const at = this.#pos;
    if (at >= this.#bytes.length) throw malformed(at, `the update ends before ${what}`);
    this.#pos = at + 1;
    return this.#bytes[at]!;
  }

  /** Skips `length` bytes of `what`, which must not run past the end. */
  skip(length: number, what: string): void {
    if (this.#pos + length > this.#bytes.length) throw malformed(this.#pos, `${what} runs past the end`);
    this.#pos += length;
  }

  /** The bytes [start, end), read already, without copying them. */
  subarray(start: number, end: number): Uint8Array {
    return this.#bytes.subarray(start, end);
  }

  /** A view of the bytes, for the fixed-width numbers of lib0's `any` values. */
  view(): DataView {
    return (this.#view ??= new DataView(this.#bytes.buffer, this.#bytes.byteOffset, this.#bytes.byteLength));
  }

  /** A varuint as lib0 writes it (at most 8 bytes here, within Number.MAX_SAFE_INTEGER). */
  uint(what: string): number {
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
  varInt(): number {
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
  skipString(): number {
    const length = this.uint('a string length');
    const start = this.#pos;
    this.skip(length, 'a string');
    const units = utf16Length(this.#bytes, start, start + length);
    if (units < 0) throw malformed(start, 'a string that is not UTF-8');
    return units;
  }

  /** Reads a varstring, which must be UTF-8. */
  readString(): string {
    const length = this.uint('a string length');
    const start = this.#pos;
    this.skip(length, 'a string');
    const text = decodeUtf8(this.#bytes, start, start + length);
    if (text === null) throw malformed(start, 'a string that is not UTF-8');
    return text;
  }

  /** Reads a varstring, checked as UTF-8 but compared as bytes (nothing is decoded); true when its bytes are `expected`. */
  stringIs(expected: readonly number[]): boolean {
    const length = this.uint('a string length');
    const start = this.#pos;
    this.skip(length, 'a string');
    if (utf16Length(this.#bytes, start, start + length) < 0) throw malformed(start, 'a string that is not UTF-8');
    if (length !== expected.length) return false;
    for (let i = 0; i < length; i++) if (this.#bytes[start + i] !== expected[i]) return false;
    return true;
  }
}
