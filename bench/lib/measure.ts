/**
 * Timing helpers shared by every benchmark: repeat a task, keep the
 * samples, report median and p95. Benchmarks print and record figures; they
 * never pass or fail on a timing.
 */

/** Summary of repeated samples, in milliseconds. */
export interface Sample {
  readonly runs: number;
  readonly medianMs: number;
  readonly p95Ms: number;
  readonly minMs: number;
}

/** The q-quantile (0–1) of sorted numbers, nearest-rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Summarises raw samples in ms. */
export function summarise(samplesMs: readonly number[]): Sample {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  return { runs: sorted.length, medianMs: quantile(sorted, 0.5), p95Ms: quantile(sorted, 0.95), minMs: sorted[0] ?? NaN };
}

/** Runs `task` `warmup` times unmeasured, then `runs` times measured. */
export async function measure(task: () => unknown, options: { runs: number; warmup?: number }): Promise<Sample> {
  for (let i = 0; i < (options.warmup ?? 3); i++) await task();
  const samples: number[] = [];
  for (let i = 0; i < options.runs; i++) {
    const start = performance.now();
    await task();
    samples.push(performance.now() - start);
  }
  return summarise(samples);
}
