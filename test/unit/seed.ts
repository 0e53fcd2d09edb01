/**
 * Seeds for random tests: a fresh one per run, printed so a failure can be
 * replayed with `TABULA_SEED=<seed> npx vitest run …` (Node only; in the
 * browser project the variable is not visible and a fresh seed is used).
 */
export function testSeed(name: string): number {
  const fromEnv = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.TABULA_SEED;
  const seed = fromEnv !== undefined && fromEnv !== '' ? Number(fromEnv) : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isSafeInteger(seed)) throw new Error(`TABULA_SEED must be an integer, got ${fromEnv}`);
  console.log(`[${name}] seed ${seed} (replay with TABULA_SEED=${seed})`);
  return seed;
}
