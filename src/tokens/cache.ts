/**
 * A bounded least-recently-used cache of token counts, keyed by a 64-bit
 * hash of the text (two 32-bit multiplicative hashes, cyrb53-style) and its
 * length, so large texts are not kept alive as keys.
 */

/** A compact key for `text`: equal texts give equal keys; different ones collide with negligible odds. */
export function textKey(text: string): string {
  let h1 = 0xdeadbeef ^ text.length;
  let h2 = 0x41c6ce57 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ code, 2654435761);
    h2 = Math.imul(h2 ^ code, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return `${(h1 >>> 0).toString(36)}.${(h2 >>> 0).toString(36)}.${text.length.toString(36)}`;
}

export class CountCache {
  readonly #max: number;
  readonly #entries = new Map<string, number>();

  constructor(maxEntries: number) {
    this.#max = maxEntries;
  }

  get(key: string): number | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined) {
      // Re-insert to mark it most recently used (Map keeps insertion order).
      this.#entries.delete(key);
      this.#entries.set(key, value);
    }
    return value;
  }

  set(key: string, value: number): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
  }

  get size(): number {
    return this.#entries.size;
  }
}
