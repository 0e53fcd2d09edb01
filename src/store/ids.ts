/** Random identifiers: 32 lowercase hex characters (128 bits) from the platform's CSPRNG. */
export function newId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let out = '';
  for (const byte of bytes) out += byte.toString(16).padStart(2, '0');
  return out;
}

/** A short random client id for order keys: unique per open Tabula instance (per tab). */
export function newClientId(): string {
  return newId().slice(0, 12);
}
