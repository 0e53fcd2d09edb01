/**
 * The server's limits: the defaults of the protocol with the options'
 * overrides, each checked once when the server is created, so that a limit
 * of 0, NaN or a fraction fails there and not on the first request.
 */
import { TabulaError } from '../core/errors.js';
import { DEFAULT_SYNC_LIMITS, type SyncLimits } from '../sync/protocol.js';

/** The longest delay a timer honours (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const LIMIT_NAMES = ['maxBodyBytes', 'maxPushItems', 'maxUpdateBytes', 'maxPullItems', 'bodyTimeoutMs', 'maxStreamQueueBytes', 'maxStreamsPerUser', 'maxDriftMs'] as const;

/** The limits with `overrides` applied; throws `argument/invalid` naming a limit that is not a positive integer. */
export function limitsOf(overrides: Partial<SyncLimits> = {}): SyncLimits {
  const limits: SyncLimits = { ...DEFAULT_SYNC_LIMITS, ...overrides };
  for (const name of LIMIT_NAMES) {
    const value: unknown = limits[name];
    // A NaN or 0 limit would refuse everything, or (as a timer's delay) nothing at all.
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || (name === 'bodyTimeoutMs' && value > MAX_TIMER_MS)) {
      throw new TabulaError('argument/invalid', `limits.${name} must be a positive integer${name === 'bodyTimeoutMs' ? ` of ms up to ${MAX_TIMER_MS}` : ''}, got ${String(value)}; leave it out for ${DEFAULT_SYNC_LIMITS[name]}.`);
    }
  }
  return limits;
}
