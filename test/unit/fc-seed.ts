/**
 * One seed for every fast-check property, so a failure can be replayed:
 * `TABULA_SEED=<seed> npx vitest run --project unit <file>`. The seed is
 * fixed unless TABULA_SEED names another, so a run is reproducible; it is
 * printed once per test file. `TABULA_RUNS=<factor>` multiplies every
 * property's runs, for a longer search than the suite's own budget.
 *
 * Usage: `fc.assert(property, fcParams(200))` or `fcParams(200, { endOnFailure: true })`.
 */
import type fc from 'fast-check';

/** The default seed, the same as the blackboard convergence test's base seed. */
export const DEFAULT_SEED = 20_261_130;

// Node only; in the browser project `process` is absent and the defaults apply.
const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};

function envNumber(name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  return value;
}

/** This run's seed (TABULA_SEED, else DEFAULT_SEED). */
export const FC_SEED = envNumber('TABULA_SEED', DEFAULT_SEED);
/** The factor every property's number of runs is multiplied by (TABULA_RUNS, else 1). */
export const FC_RUNS_FACTOR = Math.max(1, envNumber('TABULA_RUNS', 1));

let printed = false;

/**
 * Parameters for fc.assert: this run's seed and `numRuns` × TABULA_RUNS.
 * A failure's message names the seed (fast-check prints it with the counterexample).
 */
export function fcParams<T>(numRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  if (!printed) {
    printed = true;
    console.info(`fast-check seed ${FC_SEED}${FC_RUNS_FACTOR > 1 ? `, runs ×${FC_RUNS_FACTOR}` : ''} (replay with TABULA_SEED=${FC_SEED})`);
  }
  return { ...extra, seed: FC_SEED, numRuns: numRuns * FC_RUNS_FACTOR };
}
