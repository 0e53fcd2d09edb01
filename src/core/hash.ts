/**
 * A short, stable string hash for keys and digests. It is not for security:
 * the integrations use it to keep storage keys short (records carry their
 * real ids, and readers check them) and to tell whether stored content
 * changed.
 */

/** A 64-bit FNV-style hash of `text` (its UTF-16 code units) as 16 lowercase hex digits. */
export function shortHash(text: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) >>> 0;
    h2 = (h2 ^ (h1 >>> 13)) >>> 0;
  }
  return h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0');
}
