// @ts-check
/**
 * Are the Types Wrong? on the packed package, packed into a folder of this
 * run's own. `attw --pack` would pack into the repository root and delete
 * the tarball after: two runs of one checkout at once (two `npm test`s) would
 * write, read and delete the same `tabula-sdk-<version>.tgz`. Arguments are
 * passed on to attw (e.g. `--profile esm-only`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tabula-attw-'));
try {
  /** @type {unknown} */
  const report = JSON.parse(execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }));
  const packed = Array.isArray(report) ? /** @type {{ filename?: unknown }} */ (report[0]) : undefined;
  if (typeof packed?.filename !== 'string') throw new Error(`npm pack reported no tarball: ${JSON.stringify(report)}`);
  // Its bin, found through its package.json (the only path of it that its exports map opens).
  const attw = join(dirname(createRequire(import.meta.url).resolve('@arethetypeswrong/cli/package.json')), 'dist/index.js');
  execFileSync(process.execPath, [attw, join(dir, packed.filename), ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
} catch (error) {
  // attw has printed its report; exit with its status instead of a stack trace.
  const status = /** @type {{ status?: number }} */ (error).status;
  if (typeof status === 'number') process.exitCode = status;
  else throw error;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
