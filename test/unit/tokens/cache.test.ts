/**
 * The per-text count cache: least recently used entries go first, the size
 * stays bounded, and text keys tell texts apart.
 */
import { describe, expect, it } from 'vitest';
import { CountCache, textKey } from '../../../src/tokens/cache.js';

describe('CountCache (LRU)', () => {
  it('evicts the least recently used entry, where a get() counts as a use', () => {
    const cache = new CountCache(2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1); // a is now more recent than b
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
    expect(cache.size).toBe(2);
  });

  it('a set() of a present key refreshes it and evicts nothing', () => {
    const cache = new CountCache(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 10);
    expect(cache.size).toBe(2);
    cache.set('c', 3); // b is the oldest now
    expect(cache.get('a')).toBe(10);
    expect(cache.get('b')).toBeUndefined();
  });

  it('never holds more than its bound, and a miss adds nothing', () => {
    const cache = new CountCache(3);
    for (let i = 0; i < 50; i++) {
      cache.set(`k${i}`, i);
      expect(cache.size).toBe(Math.min(i + 1, 3));
    }
    expect([cache.get('k47'), cache.get('k48'), cache.get('k49')]).toEqual([47, 48, 49]);
    expect(cache.get('k46')).toBeUndefined();
    expect(cache.get('missing')).toBeUndefined();
    expect(cache.size).toBe(3);
    // A stored count of 0 (the empty text) is a hit, not a miss.
    cache.set('empty', 0);
    expect(cache.get('empty')).toBe(0);
  });
});

describe('textKey', () => {
  it('equal texts give equal keys; texts that differ in one character, order or length do not', () => {
    const texts = ['', 'a', 'b', 'ab', 'ba', 'aa', 'a'.repeat(1000), `${'a'.repeat(999)}b`, 'héllo', 'hello', '🚀', '\u0000'];
    const keys = texts.map(textKey);
    expect(new Set(keys).size).toBe(texts.length);
    expect(textKey('a'.repeat(1000))).toBe(keys[6]);
    expect(textKey('')).toMatch(/\.0$/); // the length is part of the key
    expect(textKey('x'.repeat(36))).toMatch(/\.10$/);
  });

  it('spreads similar texts over distinct keys (no collision among 20,000 near-duplicates)', () => {
    const keys = new Set<string>();
    for (let i = 0; i < 20_000; i++) keys.add(textKey(`message ${i} of the session`));
    expect(keys.size).toBe(20_000);
  });
});
