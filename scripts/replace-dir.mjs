// @ts-check
/**
 * Puts a freshly built folder in place of the one readers use, for builds
 * that may run at the same time as readers and as each other (two test runs
 * of one checkout: see scripts/build.mjs). Under a lock, the new folder
 * replaces the old one only if their contents differ, by two renames: a
 * reader never sees a half-written folder, and a build of unchanged sources
 * never touches the folder at all.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

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
 * True when both folders exist and hold the same files with the same bytes.
 * @param {string} a
 * @param {string} b
 */
export function sameTree(a, b) {
  if (!existsSync(a) || !existsSync(b)) return false;
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

/**
 * Takes the lock (a folder: mkdir is atomic), taking over one whose holder has died.
 * @param {string} lock
 */
async function acquire(lock) {
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
      // Made, its pid not written yet: wait for it below.
    }
    if (Number.isInteger(holder) && holder > 0 && !isAlive(holder)) rmSync(lock, { recursive: true, force: true });
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Moves `staging` to `target` unless `target` already holds the same files; `staging` is gone
 * afterwards either way. `staging` must be on the same file system as `target` (a sibling).
 * @param {string} staging
 * @param {string} target
 * @param {string} lock a path for the lock folder, the same for every builder of `target`
 * @returns {Promise<boolean>} whether `target` was replaced
 */
export async function replaceIfChanged(staging, target, lock) {
  await acquire(lock);
  try {
    if (sameTree(staging, target)) return false;
    const old = `${staging}-old`;
    if (existsSync(target)) renameSync(target, old);
    renameSync(staging, target);
    rmSync(old, { recursive: true, force: true });
    return true;
  } finally {
    rmSync(lock, { recursive: true, force: true });
    rmSync(staging, { recursive: true, force: true });
  }
}
