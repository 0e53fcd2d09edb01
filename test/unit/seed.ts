/**
 * One seed for every random test, so a failure can be replayed:
 * `TABULA_SEED=<seed> npx vitest run --project unit <file>`. The seed is
 * fixed unless TABULA_SEED names another (`TABULA_SEED=random` draws a fresh
 * one, for exploring), so the suite is reproducible; every test prints the
 * seed it used. `TABULA_RUNS=<factor>` multiplies every property's runs, for
 * a longer search than the suite's own budget. In the browser project
 * `process` is absent and the defaults apply.
 *
 * Usage: `fc.assert(property, fcParams(200))`, or `testSeed('name')` where a
 * test draws its own random numbers.
 */
import type fc from 'fast-check';

/** The default seed, the same in every file. */
export const DEFAULT_SEED = 20_261_130;

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};

function envNumber(name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (name === 'TABULA_SEED' && raw === 'random') return Math.floor(Math.random() * 2 ** 31);
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  return value;
}

/** This run's seed (TABULA_SEED, else DEFAULT_SEED). */
export const TEST_SEED = envNumber('TABULA_SEED', DEFAULT_SEED);
/** The factor every property's number of runs is multiplied by (TABULA_RUNS, else 1). */
export const RUNS_FACTOR = Math.max(1, envNumber('TABULA_RUNS', 1));

/** This run's seed, printed under `name` so a failure names what to replay. */
export function testSeed(name: string): number {
  console.info(`[${name}] seed ${TEST_SEED}${RUNS_FACTOR > 1 ? `, runs ×${RUNS_FACTOR}` : ''} (replay with TABULA_SEED=${TEST_SEED})`);
  return TEST_SEED;
}

let printed = false;

/** Parameters for fc.assert: this run's seed and `numRuns` × TABULA_RUNS. */
export function fcParams<T>(numRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  if (!printed) {
    printed = true;
    testSeed('fast-check');
  }
  return { ...extra, seed: TEST_SEED, numRuns: numRuns * RUNS_FACTOR };
}
