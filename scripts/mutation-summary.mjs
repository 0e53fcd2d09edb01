// @ts-check
/**
 * Prints the mutation score per file and per folder from Stryker's JSON
 * report (`npm run mutation` runs it after Stryker): killed, timed out,
 * survived and uncovered mutants, and the score, (killed + timeout) over
 * every mutant that counts (compile errors and ignored ones do not).
 *
 * Equivalent mutants (a change no test can observe, because the program
 * behaves the same) are listed in scripts/mutation-equivalents.json, each
 * with its reason, matched by file, mutator, replacement and the text of
 * its source line (not its line number, which moves). A survivor on that
 * list is counted as `equivalent`, out of the score; the list never hides
 * a mutant that a test kills.
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** @typedef {{ status: string, mutatorName?: string, replacement?: string, location?: { start: { line: number } } }} Mutant */
/** @typedef {{ files: Record<string, { source?: string, mutants: Mutant[] }> }} MutationReport */
/** @typedef {{ file: string, mutator: string, replacement: string, line: string, reason: string }} Equivalent */
/**
 * @typedef {{ name: string, killed: number, timeout: number, survived: number, noCoverage: number,
 *   equivalent: number, ignored: number, errors: number, total: number, score: number | null }} ScoreRow
 */

/**
 * @param {string} name
 * @param {Mutant[]} mutants
 * @returns {ScoreRow}
 */
function tally(name, mutants) {
  const row = { name, killed: 0, timeout: 0, survived: 0, noCoverage: 0, equivalent: 0, ignored: 0, errors: 0, total: 0, score: /** @type {number | null} */ (null) };
  for (const { status } of mutants) {
    if (status === 'Equivalent') row.equivalent += 1;
    else if (status === 'Killed') row.killed += 1;
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
 * Marks the survivors that `equivalents` lists as 'Equivalent'; returns the
 * entries that matched no survivor (stale, or now killed: drop them).
 * @param {MutationReport} report
 * @param {Equivalent[]} equivalents
 * @returns {Equivalent[]}
 */
export function markEquivalents(report, equivalents) {
  const unused = new Set(equivalents);
  for (const [path, file] of Object.entries(report.files)) {
    const lines = (file.source ?? '').split('\n');
    for (const mutant of file.mutants) {
      if (mutant.status !== 'Survived') continue;
      const text = (lines[(mutant.location?.start.line ?? 0) - 1] ?? '').trim();
      const match = equivalents.find(
        (e) => path.endsWith(e.file) && e.mutator === mutant.mutatorName && e.replacement === mutant.replacement && e.line === text,
      );
      if (match) {
        mutant.status = 'Equivalent';
        unused.delete(match);
      }
    }
  }
  return [...unused];
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
  const header = ['', 'score', 'killed', 'timeout', 'survived', 'no cov', 'total', 'equiv.'];
  const lines = rows.map((r) => [r.name, r.score === null ? 'n/a' : r.score.toFixed(1), r.killed, r.timeout, r.survived, r.noCoverage, r.total, r.equivalent].map(String));
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => (line[i] ?? '').length)));
  /** @param {string[]} cells */
  const pad = (cells) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ');
  return [pad(header), ...lines.map(pad)].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const path = process.argv[2] ?? 'reports/mutation/mutation.json';
  const parsed = /** @type {unknown} */ (JSON.parse(readFileSync(path, 'utf8')));
  const report = /** @type {MutationReport} */ (parsed);
  const listed = /** @type {unknown} */ (JSON.parse(readFileSync(new URL('./mutation-equivalents.json', import.meta.url), 'utf8')));
  const unused = markEquivalents(report, /** @type {{ equivalents: Equivalent[] }} */ (listed).equivalents);
  const { files, folders, all } = summarize(report);
  console.log(`Mutation score per file (${path}); equivalent mutants (scripts/mutation-equivalents.json) are out of the score\n`);
  console.log(formatTable(files));
  console.log('\nPer folder\n');
  console.log(formatTable([...folders, all]));
  // Entries for files this run did not mutate are expected (a run with --mutate); others are stale.
  const mutated = Object.keys(report.files);
  const stale = unused.filter((e) => mutated.some((path) => path.endsWith(e.file)));
  if (stale.length > 0) {
    console.log(`\n${stale.length} listed equivalent mutant(s) matched no survivor (killed now, or the line changed):`);
    for (const e of stale) console.log(`  ${e.file}: ${e.mutator} ${JSON.stringify(e.replacement)} on "${e.line}"`);
  }
}
