// @ts-check
/**
 * `npm publish --dry-run` of the package, and a check that what it would upload is complete: the
 * root entry (dist/index.js, dist/index.d.ts), every target of `exports`, `types`, `main` and `bin`,
 * LICENSE, README.md and CHANGELOG.md. npm publishes a package without its build as happily as with
 * it (a dry run with no dist/ exits 0), so the list npm reports is checked here; exits 1 naming
 * each missing file. Run after `npm run build` (`npm run check:package` does).
 *
 * The dry run is `--offline`: it checks the package, not the registry (online, npm asks the registry
 * whether this version is taken; unreachable, it retries for over a minute before going on), and
 * `--ignore-scripts`: `prepublishOnly` would build a second time. A directory argument checks the
 * package there instead of this repository's.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Files a published package must hold whatever its manifest says. */
export const ALWAYS = ['package.json', 'LICENSE', 'README.md', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts'];

/**
 * Every file path a manifest points at (`exports` through its conditions and fallbacks, `types`,
 * `main`, `bin`), without `./`, plus {@link ALWAYS}; sorted, no repeats. A target may hold `*`, as
 * `exports` patterns do. `null` targets (an export blocked on purpose) point at nothing.
 * @param {Record<string, unknown>} manifest the package.json
 * @returns {string[]}
 */
export function requiredFiles(manifest) {
  /** @type {Set<string>} */
  const required = new Set(ALWAYS);
  /** @param {unknown} target */
  const walk = (target) => {
    if (typeof target === 'string') required.add(target.replace(/^\.\//, ''));
    else if (Array.isArray(target)) target.forEach(walk);
    else if (typeof target === 'object' && target !== null) Object.values(target).forEach(walk);
  };
  walk(manifest.exports);
  walk(manifest.types);
  walk(manifest.main);
  walk(manifest.bin);
  return [...required].sort();
}

/**
 * The required files (see {@link requiredFiles}) that are not among `packed`; a pattern with `*` is
 * missing when no packed path matches it (`*` stands for any characters, `/` included, as in `exports`).
 * @param {Record<string, unknown>} manifest the package.json
 * @param {readonly string[]} packed paths in the tarball, relative to its root
 * @returns {string[]}
 */
export function missingFiles(manifest, packed) {
  const present = new Set(packed);
  return requiredFiles(manifest).filter((file) => {
    if (!file.includes('*')) return !present.has(file);
    const pattern = new RegExp(`^${file.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
    return !packed.some((path) => pattern.test(path));
  });
}

/**
 * The tarball's file paths from `npm publish --dry-run --json` output: npm 11 keys its report by
 * package name, npm 10 printed the report itself.
 * @param {string} stdout npm's standard output
 * @param {string} name the package's name
 * @returns {{ id: string, paths: string[] }}
 */
export function packedFiles(stdout, name) {
  /** @param {unknown} value */
  const record = (value) => /** @type {Record<string, unknown>} */ (typeof value === 'object' && value !== null ? value : {});
  const root = record(JSON.parse(stdout));
  const report = 'files' in root ? root : record(root[name]);
  /** @type {unknown[]} */
  const files = Array.isArray(report.files) ? report.files : [];
  const paths = files.map((file) => record(file).path);
  if (paths.length === 0 || !paths.every((path) => typeof path === 'string')) {
    throw new Error(`npm publish --dry-run --json reported no file list for ${name}; npm changed its report. Its output:\n${stdout}`);
  }
  return { id: typeof report.id === 'string' ? report.id : name, paths: /** @type {string[]} */ (paths) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  /** @type {unknown} */
  const parsed = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const manifest = /** @type {Record<string, unknown>} */ (parsed);
  const name = String(manifest.name);
  const result = spawnSync('npm', ['publish', '--dry-run', '--json', '--offline', '--ignore-scripts'], { cwd: dir, encoding: 'utf8' });
  if (result.status !== 0) {
    // Its notices and error are on stderr; show them, not a stack of ours.
    process.stderr.write(result.stderr);
    console.error(`npm publish --dry-run failed (exit ${result.status ?? result.signal}) in ${dir}.`);
    process.exit(1);
  }
  const { id, paths } = packedFiles(result.stdout, name);
  const missing = missingFiles(manifest, paths);
  if (missing.length > 0) {
    console.error(
      `npm publish would upload ${id} without:\n${missing.map((file) => `  ${file}`).join('\n')}\n` +
        'Build first (`npm run build`; `npm run check:package` does), or list the missing paths in `files` of package.json.',
    );
    process.exit(1);
  }
  console.log(`npm publish --dry-run: ${id}, ${paths.length} files; all ${requiredFiles(manifest).length} required present (entries, types, bin, LICENSE, README, CHANGELOG).`);
}
