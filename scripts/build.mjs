// @ts-check
/**
 * `npm run build`: compiles src/ into dist/ so that builds running at the same
 * time (two test runs of one checkout: check:package, test/unit/package.test.ts
 * and the consumer e2e tests each build first) never show a reader a dist/
 * that is missing or half written.
 *
 * tsc writes into a fresh staging folder beside dist/ (same depth, so the
 * source maps' relative paths are the same); then, under a lock, the staging
 * folder replaces dist/ only if it differs. A build of the same sources thus
 * leaves dist/ untouched while another run reads it; a build of changed
 * sources swaps the whole folder by two renames, never file by file.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const lock = join(root, '.dist-lock');

/**
 * Every file under `dir`, as paths relative to `base`, sorted.
 * @param {string} dir
 * @param {string} [base]
 * @returns {string[]}
 */
function filesUnder(dir, base = dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? filesUnder(join(dir, entry.name), base) : [relative(base, join(dir, entry.name))]))
    .sort();
}

/**
 * True when both folders hold the same files with the same bytes.
 * @param {string} a
 * @param {string} b
 */
function sameTree(a, b) {
  if (!existsSync(b)) return false;
  const files = filesUnder(a);
  const others = filesUnder(b);
  if (files.length !== others.length || files.some((file, i) => file !== others[i])) return false;
  return files.every((file) => readFileSync(join(a, file)).equals(readFileSync(join(b, file))));
}

/** @param {number} pid */
function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return /** @type {NodeJS.ErrnoException} */ (error).code === 'EPERM';
  }
}

/** Takes the lock (a folder: mkdir is atomic), taking over one whose holder has died. */
async function acquire() {
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return;
    } catch (error) {
      if (/** @type {NodeJS.ErrnoException} */ (error).code !== 'EEXIST') throw error;
    }
    let holder = NaN;
    try {
      holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
    } catch {
      // Made but its pid not written yet: wait for it below.
    }
    if (Number.isInteger(holder) && holder > 0 && !isAlive(holder)) rmSync(lock, { recursive: true, force: true });
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const staging = mkdtempSync(join(root, '.dist-staging-'));
try {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', staging], { cwd: root, stdio: 'inherit' });
  await acquire();
  try {
    if (!sameTree(staging, dist)) {
      const old = `${staging}-old`;
      if (existsSync(dist)) renameSync(dist, old);
      renameSync(staging, dist);
      rmSync(old, { recursive: true, force: true });
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
} finally {
  rmSync(staging, { recursive: true, force: true });
}
