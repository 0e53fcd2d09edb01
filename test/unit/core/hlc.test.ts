import fc from 'fast-check';
import { fcParams } from '../seed.js';
import { describe, expect, it } from 'vitest';
import { compareHlc, createHlc, isTabulaError } from '../../../src/core/index.js';
import { ORDER_KEY, formatHlc, parseHlc } from '../../../src/core/hlc.js';
import { MAX_WALL_MS, keyAfter } from '../../../src/core/hlc.js';

describe('hybrid logical clock', () => {
  it('formats fixed-width keys that round-trip', () => {
    const key = formatHlc({ wallMs: 1_700_000_000_000, counter: 10, clientId: 'tab-1' });
    expect(key).toBe('001700000000000.00000a.tab-1');
    expect(parseHlc(key)).toEqual({ wallMs: 1_700_000_000_000, counter: 10, clientId: 'tab-1' });
  });

  it('refuses malformed keys and client ids', () => {
    try {
      parseHlc('yesterday');
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    }
    expect(() => createHlc({ clientId: 'has space' })).toThrow(/clientId/);
    expect(() => createHlc({ clientId: '' })).toThrow(/clientId/);
  });

  it('increases strictly even when the wall clock stands still or goes back', () => {
    let wall = 1000;
    const clock = createHlc({ clientId: 'a', wallClock: () => wall });
    const keys = [clock.now(), clock.now()];
    wall = 500;
    keys.push(clock.now());
    wall = 2000;
    keys.push(clock.now());
    for (let i = 1; i < keys.length; i++) expect(compareHlc(keys[i - 1]!, keys[i]!)).toBe(-1);
    expect(parseHlc(keys[3]!).wallMs).toBe(2000);
  });

  it('orders a receive after the remote key, even from a clock far ahead', () => {
    const behind = createHlc({ clientId: 'z', wallClock: () => 1_000 });
    const ahead = createHlc({ clientId: 'a', wallClock: () => 9_000_000 });
    const sent = ahead.now();
    const received = behind.receive(sent);
    expect(compareHlc(sent, received)).toBe(-1);
    expect(compareHlc(received, behind.now())).toBe(-1);
  });

  it('borrows the next millisecond instead of overflowing the counter', () => {
    const clock = createHlc({ clientId: 'a', wallClock: () => 7 });
    const remote = formatHlc({ wallMs: 7, counter: 0xffffff, clientId: 'b' });
    const next = clock.receive(remote);
    expect(parseHlc(next)).toEqual({ wallMs: 8, counter: 0, clientId: 'a' });
    expect(compareHlc(remote, next)).toBe(-1);
  });

  it('sorts in causal order across clients with skewed clocks (property)', () => {
    // Each simulated client has its own skew and drift; events are local
    // ticks, sends and receives of earlier sends in random order. Every
    // event must sort after everything that causally precedes it.
    const step = fc.record({
      client: fc.nat({ max: 3 }),
      kind: fc.constantFrom('tick', 'send', 'receive'),
      pick: fc.nat(),
      advanceMs: fc.nat({ max: 5 }),
    });
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -1_000_000, max: 1_000_000 }), { minLength: 4, maxLength: 4 }),
        fc.array(step, { minLength: 1, maxLength: 200 }),
        (skews, steps) => {
          let realMs = 1_700_000_000_000;
          const clocks = skews.map((skew, i) => createHlc({ clientId: `c${i}`, wallClock: () => realMs + skew }));
          // The greatest key each client has causally seen so far.
          const causalMax: string[] = skews.map(() => '');
          const inFlight: { key: string; causal: string }[] = [];
          for (const { client, kind, pick, advanceMs } of steps) {
            realMs += advanceMs;
            const clock = clocks[client]!;
            let key: string;
            let before = causalMax[client]!;
            if (kind === 'receive' && inFlight.length > 0) {
              const message = inFlight.splice(pick % inFlight.length, 1)[0]!;
              key = clock.receive(message.key);
              if (message.causal > before) before = message.causal;
            } else {
              key = clock.now();
              if (kind === 'send') inFlight.push({ key, causal: key });
            }
            expect(compareHlc(before, key)).toBe(-1);
            causalMax[client] = key;
          }
        },
      ),
      fcParams(200),
    );
  });
});

describe('HLC counters', () => {
  const counterOf = (key: string): number => parseHlc(key).counter;

  it('starts each new millisecond at counter 0 and counts up within one', () => {
    let wall = 1_000;
    const clock = createHlc({ clientId: 'a', wallClock: () => wall });
    expect(counterOf(clock.now())).toBe(0);
    expect(counterOf(clock.now())).toBe(1);
    wall = 2_000;
    expect(counterOf(clock.now())).toBe(0);
  });

  it('on receive, follows whichever clock holds the greatest wall time', () => {
    const clock = createHlc({ clientId: 'a', wallClock: () => 1_000 });
    clock.now();
    clock.now(); // counter 1 at 1000
    // A remote behind us in wall time, however high its counter: ours counts on.
    expect(parseHlc(clock.receive(formatHlc({ wallMs: 900, counter: 50, clientId: 'b' })))).toMatchObject({ wallMs: 1_000, counter: 2 });
    // A remote ahead of us: its counter counts on, ours is forgotten.
    expect(parseHlc(clock.receive(formatHlc({ wallMs: 1_500, counter: 0, clientId: 'b' })))).toMatchObject({ wallMs: 1_500, counter: 1 });
    // The same wall time on both sides: the higher counter counts on.
    expect(parseHlc(clock.receive(formatHlc({ wallMs: 1_500, counter: 7, clientId: 'b' })))).toMatchObject({ wallMs: 1_500, counter: 8 });
  });
});

describe('HLC bounds (issue 26, items 8 and 9)', () => {
  const MAX = '999999999999999.ffffff.zzzz';

  it('does not follow a remote key further ahead than maxDriftMs, and follows one within it', () => {
    let wall = 1_000_000;
    const clock = createHlc({ clientId: 'a', wallClock: () => wall, maxDriftMs: 5000 });
    const far = formatHlc({ wallMs: wall + 5001, counter: 3, clientId: 'b' });
    const received = clock.receive(far);
    expect(parseHlc(received)).toEqual({ wallMs: 1_000_000, counter: 0, clientId: 'a' });
    // Nothing of it stays: the next local key is at the wall clock too.
    expect(parseHlc(clock.now()).wallMs).toBe(1_000_000);
    const near = formatHlc({ wallMs: wall + 5000, counter: 3, clientId: 'b' });
    expect(compareHlc(near, clock.receive(near))).toBe(-1);
    wall += 10;
    expect(parseHlc(clock.now())).toMatchObject({ wallMs: 1_005_000, counter: 5 });
  });

  it('never makes a key past 15 digits of wall time: the greatest key received, a wall clock past it, the counter’s end there', () => {
    const unbounded = createHlc({ clientId: 'a', wallClock: () => 7 });
    const after = unbounded.receive(MAX);
    expect(after).toMatch(ORDER_KEY);
    expect(parseHlc(after).wallMs).toBe(MAX_WALL_MS);
    expect(unbounded.now()).toMatch(ORDER_KEY);
    const future = createHlc({ clientId: 'a', wallClock: () => 1e16 });
    expect(parseHlc(future.now()).wallMs).toBe(MAX_WALL_MS);
    // Bounded, the greatest key is not followed at all.
    const bounded = createHlc({ clientId: 'a', wallClock: () => 1_700_000_000_000, maxDriftMs: 60_000 });
    expect(parseHlc(bounded.receive(MAX)).wallMs).toBe(1_700_000_000_000);
  });

  it('starts again from the wall clock once it went back more than maxDriftMs (a clock corrected after running ahead)', () => {
    let wall = 2_000_000_000_000;
    const clock = createHlc({ clientId: 'a', wallClock: () => wall, maxDriftMs: 5000 });
    clock.now();
    wall -= 4000;
    expect(parseHlc(clock.now()).wallMs).toBe(2_000_000_000_000);
    wall -= 2000;
    expect(parseHlc(clock.now())).toEqual({ wallMs: 1_999_999_994_000, counter: 0, clientId: 'a' });
  });

  it('keyAfter: the smallest key of a client after any key, a suffixed one included, up to the greatest', () => {
    expect(keyAfter('001700000000000.000002.zz#00000003', 'a')).toBe('001700000000000.000003.a');
    expect(keyAfter('001700000000000.ffffff.zz', 'a')).toBe('001700000000001.000000.a');
    expect(keyAfter(MAX, 'a')).toBe('999999999999999.ffffff.a');
  });

  it('refuses a maxDriftMs that is not a number of ms', () => {
    for (const maxDriftMs of [-1, Number.NaN]) expect(() => createHlc({ clientId: 'a', maxDriftMs })).toThrow(/maxDriftMs/);
  });
});
