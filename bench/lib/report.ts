/**
 * Printing and recording benchmark results: a table on stdout and
 * `bench/results/<name>.json` with every figure, its unit and the baseline
 * it is compared with.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

/** One row of a benchmark: a figure for Tabula and the same figure for the baseline. */
export interface BenchRow {
  readonly case: string;
  readonly unit: string;
  readonly tabula: number;
  readonly baseline: number;
  /** tabula / baseline, or the inverse when `higherIsBetter`. */
  readonly ratio?: number;
  readonly note?: string;
}

export interface BenchReport {
  readonly name: string;
  readonly title: string;
  /** What the baseline is, in words. */
  readonly baseline: string;
  readonly rows: readonly BenchRow[];
  readonly goals?: readonly string[];
}

const fmt = (value: number): string => (Number.isInteger(value) ? String(value) : value.toFixed(value < 1 ? 4 : 2));

/** Prints the report as a table and writes bench/results/<name>.json. */
export function report(result: BenchReport): void {
  const rows = result.rows.map((row) => ({
    case: row.case,
    unit: row.unit,
    tabula: fmt(row.tabula),
    baseline: fmt(row.baseline),
    ratio: row.ratio === undefined ? '' : `${fmt(row.ratio)}×`,
    note: row.note ?? '',
  }));
  console.log(`\n${result.title}\nbaseline: ${result.baseline}`);
  console.table(rows);
  const dir = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const machine = { node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(os.totalmem() / 2 ** 30) };
  writeFileSync(`${dir}${result.name}.json`, `${JSON.stringify({ ...result, measuredAt: new Date().toISOString(), machine }, null, 2)}\n`);
}

/** Writes bench/results/<name>.json for a benchmark whose rows do not fit {@link BenchReport} (several systems per row). */
export function writeResult(name: string, result: object): void {
  const dir = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const machine = { node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(os.totalmem() / 2 ** 30) };
  writeFileSync(`${dir}${name}.json`, `${JSON.stringify({ name, ...result, measuredAt: new Date().toISOString(), machine }, null, 2)}\n`);
}
