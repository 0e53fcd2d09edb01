/** Random ids come from a pooled CSPRNG buffer: each is 32 hex characters, none repeats across pool refills. */
import { describe, expect, it } from 'vitest';
import { newClientId, newId } from '../../../src/store/ids.js';

describe('newId', () => {
  it('gives 32 lowercase hex characters, all distinct over many pool refills', () => {
    const ids = Array.from({ length: 5_000 }, () => newId());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(ids.length);
    // Every byte value shows up: the pool is random bytes, not a counter or a fixed pattern.
    const bytes = new Set(ids.flatMap((id) => id.match(/../g) ?? []));
    expect(bytes.size).toBe(256);
  });

  it('client ids are 12 hex characters and distinct', () => {
    const ids = Array.from({ length: 1_000 }, () => newClientId());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
