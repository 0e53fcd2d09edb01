// @ts-check
/**
 * Prints the mutation score per file and per folder from Stryker's JSON
 * report (`npm run mutation` runs it after Stryker): killed, timed out,
 * survived and uncovered mutants, and the score, (killed + timeout) over
 * every mutant that counts (compile errors and ignored ones do not).
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** @typedef {{ status: string }} Mutant */
/** @typedef {{ files: Record<string, { mutants: Mutant[] }> }} MutationReport */
/**
 * @typedef {{ name: string, killed: number, timeout: number, survived: number, noCoverage: number,
 *   ignored: number, errors: number, total: number, score: number | null }} ScoreRow
 */

/**
 * @param {string} name
 * @param {Mutant[]} mutants
 * @returns {ScoreRow}
 */
function tally(name, mutants) {
  const row = { name, killed: 0, timeout: 0, survived: 0, noCoverage: 0, ignored: 0, errors: 0, total: 0, score: /** @type {number | null} */ (null) };
  for (const { status } of mutants) {
    if (status === 'Killed') row.killed += 1;
    else if (status === 'Timeout') row.timeout += 1;
    else if (status === 'Survived') row.survived += 1;
    else if (status === 'NoCoverage') row.noCoverage += 1;
    else if (status === 'Ignored') row.ignored += 1;
    else row.errors += 1; // CompileError, RuntimeError
  }
  row.total = row.killed + row.timeout + row.survived + row.noCoverage;
  row.score = row.total === 0 ? null : (100 * (row.killed + row.timeout)) / row.total;
  return row;
}

/**
 * Rows per file (sorted by path), per folder (`src/<folder>`) and for everything.
 * @param {MutationReport} report
 * @returns {{ files: ScoreRow[], folders: ScoreRow[], all: ScoreRow }}
 */
export function summarize(report) {
  const files = Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b));
  /** @type {Map<string, Mutant[]>} */
  const folders = new Map();
  for (const [path, file] of files) {
    const folder = path.split('/').slice(0, 2).join('/');
    folders.set(folder, [...(folders.get(folder) ?? []), ...file.mutants]);
  }
  return {
    files: files.map(([path, file]) => tally(path, file.mutants)),
    folders: [...folders].map(([name, mutants]) => tally(name, mutants)),
    all: tally('all', files.flatMap(([, file]) => file.mutants)),
  };
}

/**
 * A fixed-width text table.
 * @param {ScoreRow[]} rows
 * @returns {string}
 */
export function formatTable(rows) {
  const header = ['', 'score', 'killed', 'timeout', 'survived', 'no cov', 'total'];
  const lines = rows.map((r) => [r.name, r.score === null ? 'n/a' : r.score.toFixed(1), r.killed, r.timeout, r.survived, r.noCoverage, r.total].map(String));
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => (line[i] ?? '').length)));
  /** @param {string[]} cells */
  const pad = (cells) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ');
  return [pad(header), ...lines.map(pad)].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const path = process.argv[2] ?? 'reports/mutation/mutation.json';
  const parsed = /** @type {unknown} */ (JSON.parse(readFileSync(path, 'utf8')));
  const report = /** @type {MutationReport} */ (parsed);
  const { files, folders, all } = summarize(report);
  console.log(`Mutation score per file (${path})\n`);
  console.log(formatTable(files));
  console.log('\nPer folder\n');
  console.log(formatTable([...folders, all]));
}
