/**
 * A hybrid logical clock: order keys that follow the wall clock when clocks
 * agree and still respect causality when they do not. A key made after
 * seeing another key (same tab, another tab, another device) sorts after
 * it, whatever the local clock says, unless that key is further ahead than
 * the clock's bound (below).
 *
 * Keys are fixed-width strings, `WWWWWWWWWWWWWWW.CCCCCC.clientId` (wall
 * milliseconds in 15 decimal digits, a counter in 6 hex digits, the client
 * id), so plain string comparison is the order and ties between clients are
 * broken by client id, the same way on every device.
 *
 * Two bounds keep one bad clock from spreading: a clock given `maxDriftMs`
 * does not follow a remote key whose wall time is further than that ahead
 * of its own (a device whose clock ran a year ahead would otherwise pull
 * every clock it syncs with a year ahead), and no key ever holds a wall time
 * past `MAX_WALL_MS`, 15 nines of ms (16 digits would not be an order key). A clock
 * whose own keys are further than `maxDriftMs` ahead of its wall clock (the
 * wall clock was set back, or corrected after running ahead) starts again
 * from the wall clock. The clock does not correct its wall clock itself: the
 * store gives it one that sync has corrected against the server
 * (`Date.now() + offset`).
 */
import { TabulaError } from './errors.js';

const WALL_DIGITS = 15;
const COUNTER_DIGITS = 6;
const MAX_COUNTER = 16 ** COUNTER_DIGITS - 1;
/** The greatest wall time an order key can hold: 15 nines of ms (about the year 33658). */
export const MAX_WALL_MS = 10 ** WALL_DIGITS - 1;
/**
 * How far ahead of its own (corrected) wall clock a remote key may be and still be followed, by
 * default, in ms: a sync server refuses ops further ahead of its time than this, and the store's
 * clock does not follow them (5 minutes).
 */
export const DEFAULT_MAX_DRIFT_MS = 5 * 60_000;
const CLIENT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const HLC_KEY = /^(\d{15})\.([0-9a-f]{6})\.([A-Za-z0-9_-]{1,64})$/;

/**
 * An order key as stored: an HLC key, optionally followed by `#` and an
 * 8-digit index for rows that one op creates several of (journal entries,
 * restored messages). The suffix keeps them in order right after their op.
 */
export const ORDER_KEY = /^\d{15}\.[0-9a-f]{6}\.[A-Za-z0-9_-]{1,64}(#\d{8})?$/;

/** The HLC key an order key starts with (drops a `#index` suffix). */
export function hlcOf(order: string): string {
  const hash = order.indexOf('#');
  return hash === -1 ? order : order.slice(0, hash);
}

/** The order key of the `index`-th row an op with order `order` creates. */
export function subOrder(order: string, index: number): string {
  return `${order}#${String(index).padStart(8, '0')}`;
}

/** The parts of an order key. */
export interface HlcTimestamp {
  /** Wall time in ms since the epoch, 0 to 15 nines. */
  readonly wallMs: number;
  /** Orders keys of one wall time: 0 to 16⁶ − 1 (six hex digits in the key). */
  readonly counter: number;
  /** The client that made the key; breaks ties between clients. */
  readonly clientId: string;
}

/** A clock owned by one client. */
export interface HybridLogicalClock {
  /** The client this clock stamps keys for (`HlcOptions.clientId`). */
  readonly clientId: string;
  /**
   * A new key for a local event: greater than every key this clock has made or followed, unless the wall
   * clock went back more than `maxDriftMs` since (then it follows the wall clock again).
   */
  now(): string;
  /**
   * Takes in a key from elsewhere and returns a key for the receive event: greater than both, when
   * the remote wall time is at most `maxDriftMs` ahead of this clock's wall clock. A key further
   * ahead is not followed (the clock does not jump to it): the result is then `now()`, which may
   * sort before the remote key.
   */
  receive(remoteKey: string): string;
}

/** How {@link createHlc} sets up a clock. */
export interface HlcOptions {
  /** Identifies this client in its keys: 1–64 of `A–Z a–z 0–9 _ -`. */
  clientId: string;
  /** Wall clock in ms since the epoch. @default Date.now */
  wallClock?: () => number;
  /**
   * How far ahead of `wallClock()` a remote key's wall time may be for `receive()` to follow it, in
   * ms. A syncing store passes 5 minutes (`DEFAULT_MAX_DRIFT_MS`, what the sync server allows too). @default Infinity (every key is followed)
   */
  maxDriftMs?: number;
}

/** Formats a timestamp as an order key (its wall time must be at most 15 nines of ms). */
export function formatHlc(timestamp: HlcTimestamp): string {
  const wall = String(timestamp.wallMs).padStart(WALL_DIGITS, '0');
  const counter = timestamp.counter.toString(16).padStart(COUNTER_DIGITS, '0');
  return `${wall}.${counter}.${timestamp.clientId}`;
}

/** Parses an order key; throws `schema/invalid` when it is not one. */
export function parseHlc(key: string): HlcTimestamp {
  const match = typeof key === 'string' ? HLC_KEY.exec(key) : null;
  if (!match) {
    throw new TabulaError(
      'schema/invalid',
      `${JSON.stringify(key)} is not an order key; expected 15 digits, "." 6 hex digits, "." and a client id.`,
    );
  }
  return { wallMs: Number(match[1]), counter: parseInt(match[2] as string, 16), clientId: match[3] as string };
}

/** Orders two keys: negative when `a` comes first. Plain string order, spelled out. */
export function compareHlc(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The smallest key of client `clientId` that sorts after `key` (an order key; a `#index` suffix is
 * ignored, the key it follows sorts before the result too): the same wall time, the next counter. For
 * an op that must follow a key whatever its distance (an op of a session life that began after a
 * delete ordered far ahead) without moving any clock. At the greatest key there is nothing after it:
 * the greatest key of `clientId` is returned, which may not sort after `key`.
 */
export function keyAfter(key: string, clientId: string): string {
  const { wallMs, counter } = parseHlc(hlcOf(key));
  if (counter < MAX_COUNTER) return formatHlc({ wallMs, counter: counter + 1, clientId });
  if (wallMs < MAX_WALL_MS) return formatHlc({ wallMs: wallMs + 1, counter: 0, clientId });
  return formatHlc({ wallMs: MAX_WALL_MS, counter: MAX_COUNTER, clientId });
}

/** Creates a clock for one client. */
export function createHlc(options: HlcOptions): HybridLogicalClock {
  const { clientId, wallClock = Date.now, maxDriftMs = Infinity } = options;
  if (!CLIENT_ID.test(clientId)) {
    throw new TabulaError(
      'argument/invalid',
      `HLC clientId ${JSON.stringify(clientId)} must be 1–64 characters of A–Z, a–z, 0–9, "_" or "-".`,
    );
  }
  if (typeof maxDriftMs !== 'number' || Number.isNaN(maxDriftMs) || maxDriftMs < 0) {
    throw new TabulaError('argument/invalid', `HLC maxDriftMs must be a number of ms, 0 or more (Infinity for no bound), got ${String(maxDriftMs)}.`);
  }
  let lastWall = 0;
  let lastCounter = 0;

  /** The wall clock in whole ms, within what a key can hold (a clock set past the year 33658, or NaN, holds at the ends). */
  const physicalMs = (): number => {
    const ms = Math.floor(wallClock());
    return ms > MAX_WALL_MS ? MAX_WALL_MS : ms > 0 ? ms : 0;
  };

  const advance = (physical: number, remoteWall: number, remoteCounter: number): string => {
    // The wall clock went back more than the bound (it was set back, or corrected against a server after
    // running ahead): start again from it. Keys further ahead than that are ones no server takes, and
    // following its own would keep this clock there until the wall clock caught up.
    if (lastWall - physical > maxDriftMs) {
      lastWall = 0;
      lastCounter = 0;
    }
    const wall = Math.max(physical, lastWall, remoteWall);
    let counter: number;
    if (wall === lastWall && wall === remoteWall) counter = Math.max(lastCounter, remoteCounter) + 1;
    else if (wall === lastWall) counter = lastCounter + 1;
    else if (wall === remoteWall) counter = remoteCounter + 1;
    else counter = 0;
    lastWall = wall;
    lastCounter = counter;
    // A counter that would overflow its digits borrows the next millisecond,
    // which keeps keys fixed-width and still strictly increasing. At the
    // greatest wall time there is no next one: the key stays the greatest.
    if (lastCounter > MAX_COUNTER) {
      if (lastWall < MAX_WALL_MS) {
        lastWall += 1;
        lastCounter = 0;
      } else {
        lastCounter = MAX_COUNTER;
      }
    }
    return formatHlc({ wallMs: lastWall, counter: lastCounter, clientId });
  };

  return {
    clientId,
    now: () => advance(physicalMs(), 0, 0),
    receive(remoteKey) {
      const remote = parseHlc(remoteKey);
      const physical = physicalMs();
      // A key from a clock far ahead is taken in without being followed: following it would order
      // every later write of this client (in every session) at that clock's time.
      if (remote.wallMs - physical > maxDriftMs) return advance(physical, 0, 0);
      return advance(physical, remote.wallMs, remote.counter);
    },
  };
}
