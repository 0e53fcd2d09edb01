/**
 * A hybrid logical clock: order keys that follow the wall clock when clocks
 * agree and still respect causality when they do not. A key made after
 * seeing another key (same tab, another tab, another device) always sorts
 * after it, whatever the local clock says.
 *
 * Keys are fixed-width strings, `WWWWWWWWWWWWWWW.CCCCCC.clientId` (wall
 * milliseconds in 15 decimal digits, a counter in 6 hex digits, the client
 * id), so plain string comparison is the order and ties between clients are
 * broken by client id, the same way on every device.
 */
import { TabulaError } from './errors.js';

const WALL_DIGITS = 15;
const COUNTER_DIGITS = 6;
const MAX_COUNTER = 16 ** COUNTER_DIGITS - 1;
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
  readonly wallMs: number;
  readonly counter: number;
  readonly clientId: string;
}

/** A clock owned by one client. */
export interface HybridLogicalClock {
  readonly clientId: string;
  /** A new key for a local event: greater than every key this clock has made or seen. */
  now(): string;
  /** Takes in a key from elsewhere and returns a key for the receive event, greater than both. */
  receive(remoteKey: string): string;
}

export interface HlcOptions {
  /** Identifies this client in its keys: 1–64 of `A–Z a–z 0–9 _ -`. */
  clientId: string;
  /** Wall clock in ms since the epoch. @default Date.now */
  wallClock?: () => number;
}

/** Formats a timestamp as an order key. */
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

/** Creates a clock for one client. */
export function createHlc(options: HlcOptions): HybridLogicalClock {
  const { clientId, wallClock = Date.now } = options;
  if (!CLIENT_ID.test(clientId)) {
    throw new TabulaError(
      'argument/invalid',
      `HLC clientId ${JSON.stringify(clientId)} must be 1–64 characters of A–Z, a–z, 0–9, "_" or "-".`,
    );
  }
  let lastWall = 0;
  let lastCounter = 0;

  const advance = (remoteWall: number, remoteCounter: number): string => {
    const physical = Math.floor(wallClock());
    const wall = Math.max(physical, lastWall, remoteWall);
    let counter: number;
    if (wall === lastWall && wall === remoteWall) counter = Math.max(lastCounter, remoteCounter) + 1;
    else if (wall === lastWall) counter = lastCounter + 1;
    else if (wall === remoteWall) counter = remoteCounter + 1;
    else counter = 0;
    lastWall = wall;
    lastCounter = counter;
    // A counter that would overflow its digits borrows the next millisecond,
    // which keeps keys fixed-width and still strictly increasing.
    if (lastCounter > MAX_COUNTER) {
      lastWall += 1;
      lastCounter = 0;
    }
    return formatHlc({ wallMs: lastWall, counter: lastCounter, clientId });
  };

  return {
    clientId,
    now: () => advance(0, 0),
    receive(remoteKey) {
      const remote = parseHlc(remoteKey);
      return advance(remote.wallMs, remote.counter);
    },
  };
}
