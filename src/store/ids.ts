/**
 * Random identifiers: 32 lowercase hex characters (128 bits) from the
 * platform's CSPRNG. Bytes are drawn 4 KiB at a time (one
 * getRandomValues call per 256 ids, not one per id: a batch of 100,000
 * appends needs 100,000 ids) and each byte is used once.
 */
const POOL_BYTES = 4096;
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));
let pool = new Uint8Array(0);
let offset = 0;

/** A fresh random id: 32 lowercase hex characters. */
export function newId(): string {
  if (offset + 16 > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
    offset = 0;
  }
  let out = '';
  for (let i = offset; i < offset + 16; i++) out += HEX[pool[i] as number] as string;
  offset += 16;
  return out;
}

/** A short random client id for order keys: unique per open Tabula instance (per tab). */
export function newClientId(): string {
  return newId().slice(0, 12);
}
