/**
 * UTF-8 as lib0 reads a Yjs update's strings: with the WHATWG decoder in fatal mode, so bytes that are not
 * UTF-8 make Yjs throw. This module owns checking such bytes, counting them in UTF-16 code units (what Yjs
 * measures a ContentString's length in) and decoding them. It knows nothing of varstrings or of where the
 * bytes sit in an update.
 */

/**
 * The UTF-16 length of the UTF-8 bytes [start, end), or -1 when they are not UTF-8 as the WHATWG decoder
 * in fatal mode reads it (no overlong forms, surrogates, code points past U+10FFFF or cut sequences).
 */
export function utf16Length(bytes: Uint8Array, start: number, end: number): number {
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
export function decodeUtf8(bytes: Uint8Array, start: number, end: number): string | null {
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
