/**
 * The exact keys the clock makes in each case of `advance` (local ahead,
 * remote ahead, both tied with the wall clock, the counter's last value),
 * and the key helpers' edges.
 */
import { describe, expect, it } from 'vitest';
import { compareHlc, createHlc, isTabulaError } from '../../../src/core/index.js';
import { ORDER_KEY, formatHlc, hlcOf, parseHlc, subOrder } from '../../../src/core/hlc.js';

const key = (wallMs: number, counter: number, clientId = 'r') => formatHlc({ wallMs, counter, clientId });

/** A clock whose wall clock the test sets. */
function clockAt(start: number) {
  const wall = { ms: start };
  return { wall, clock: createHlc({ clientId: 'me', wallClock: () => wall.ms }) };
}

describe('hybrid logical clock: each case of a new key', () => {
  it('now(): the counter restarts at 0 when the wall clock moves on, and counts up while it stands still', () => {
    const { wall, clock } = clockAt(1000);
    expect(parseHlc(clock.now())).toEqual({ wallMs: 1000, counter: 0, clientId: 'me' });
    expect(parseHlc(clock.now())).toEqual({ wallMs: 1000, counter: 1, clientId: 'me' });
    wall.ms = 1001.9; // a fractional wall clock (performance.now-based) is floored
    expect(parseHlc(clock.now())).toEqual({ wallMs: 1001, counter: 0, clientId: 'me' });
    wall.ms = 900; // the wall clock stepped back: keep the last wall time, count on
    expect(parseHlc(clock.now())).toEqual({ wallMs: 1001, counter: 1, clientId: 'me' });
  });

  it('receive() with the local, remote and wall clocks tied takes the greater counter plus one', () => {
    const { clock } = clockAt(1000);
    for (let i = 0; i < 5; i++) clock.now(); // local counter 4 at 1000
    expect(parseHlc(clock.receive(key(1000, 2)))).toEqual({ wallMs: 1000, counter: 5, clientId: 'me' });
    expect(parseHlc(clock.receive(key(1000, 9)))).toEqual({ wallMs: 1000, counter: 10, clientId: 'me' });
    expect(parseHlc(clock.now())).toEqual({ wallMs: 1000, counter: 11, clientId: 'me' });
  });

  it('receive() from a clock ahead continues the remote counter; from one behind, the local one', () => {
    const { clock } = clockAt(1000);
    clock.now(); // 1000.0
    expect(parseHlc(clock.receive(key(5000, 7)))).toEqual({ wallMs: 5000, counter: 8, clientId: 'me' });
    expect(parseHlc(clock.receive(key(3000, 40)))).toEqual({ wallMs: 5000, counter: 9, clientId: 'me' });
    // The first key of a fresh clock, receiving from a clock behind: the wall clock rules, counter 0.
    const fresh = clockAt(2000).clock;
    expect(parseHlc(fresh.receive(key(1500, 3)))).toEqual({ wallMs: 2000, counter: 0, clientId: 'me' });
    // Tied with the remote wall time only (a fresh clock, its wall clock equal to the remote's).
    const tied = clockAt(1500).clock;
    expect(parseHlc(tied.receive(key(1500, 3)))).toEqual({ wallMs: 1500, counter: 4, clientId: 'me' });
  });

  it('uses the counter up to its last value before borrowing the next millisecond', () => {
    const { clock } = clockAt(7);
    expect(parseHlc(clock.receive(key(7, 0xfffffe)))).toEqual({ wallMs: 7, counter: 0xffffff, clientId: 'me' });
    expect(parseHlc(clock.now())).toEqual({ wallMs: 8, counter: 0, clientId: 'me' });
    expect(parseHlc(clock.now())).toEqual({ wallMs: 8, counter: 1, clientId: 'me' });
  });

  it('uses Date.now by default', () => {
    const before = Date.now();
    const { wallMs } = parseHlc(createHlc({ clientId: 'me' }).now());
    expect(wallMs).toBeGreaterThanOrEqual(before);
    expect(wallMs).toBeLessThanOrEqual(Date.now());
  });
});

describe('order keys', () => {
  it('compareHlc is negative, zero or positive', () => {
    expect(compareHlc(key(1, 0), key(2, 0))).toBe(-1);
    expect(compareHlc(key(2, 0), key(1, 0))).toBe(1);
    expect(compareHlc(key(1, 1, 'a'), key(1, 1, 'a'))).toBe(0);
    expect(compareHlc(key(1, 1, 'b'), key(1, 1, 'a'))).toBe(1);
  });

  it('client ids of 1 to 64 allowed characters only', () => {
    expect(createHlc({ clientId: 'A-z_9'.padEnd(64, 'x') }).clientId).toHaveLength(64);
    for (const bad of ['x'.repeat(65), 'a.b', 'tab 1', 'é']) {
      try {
        createHlc({ clientId: bad });
        expect.unreachable(bad);
      } catch (error) {
        expect(isTabulaError(error, 'argument/invalid'), bad).toBe(true);
      }
    }
  });

  it('parses only whole keys', () => {
    const good = key(1_700_000_000_000, 0xabc, 'tab_1-x');
    expect(parseHlc(good)).toEqual({ wallMs: 1_700_000_000_000, counter: 0xabc, clientId: 'tab_1-x' });
    for (const bad of [`x${good}`, `${good} `, `${good}#00000001`, good.replace('.000abc.', '.000ABC.'), '17.000000.a', 42, null]) {
      try {
        parseHlc(bad as string);
        expect.unreachable(String(bad));
      } catch (error) {
        expect(isTabulaError(error, 'schema/invalid'), String(bad)).toBe(true);
        expect((error as Error).message).toContain('not an order key');
      }
    }
  });

  it('parses strings only: a value that merely stringifies to a key is refused (keys arrive from other tabs and devices)', () => {
    const good = key(1_700_000_000_000, 1, 'tab');
    const lookalike = { toString: () => good };
    expect(() => parseHlc(lookalike as unknown as string)).toThrow(expect.objectContaining({ code: 'schema/invalid' }) as Error);
    const clock = createHlc({ clientId: 'me', wallClock: () => 5 });
    expect(() => clock.receive(lookalike as unknown as string)).toThrow(expect.objectContaining({ code: 'schema/invalid' }) as Error);
    // The refused key moved nothing: the clock's next key is its own first one.
    expect(parseHlc(clock.now())).toEqual({ wallMs: 5, counter: 0, clientId: 'me' });
  });

  it('sub-order keys sort right after their op and before the next key, and map back to it', () => {
    const order = key(5, 1, 'a');
    const rows = [subOrder(order, 10), subOrder(order, 2), subOrder(order, 0)];
    expect(rows[1]).toBe(`${order}#00000002`);
    expect([...rows].sort()).toEqual([subOrder(order, 0), subOrder(order, 2), subOrder(order, 10)]);
    for (const row of rows) {
      expect(ORDER_KEY.test(row)).toBe(true);
      expect(hlcOf(row)).toBe(order);
      expect(row > order && row < key(5, 2, 'a')).toBe(true);
    }
    expect(hlcOf(order)).toBe(order);
    expect(ORDER_KEY.test(`${order}#1`)).toBe(false);
    expect(ORDER_KEY.test(`x${order}`)).toBe(false);
  });
});
