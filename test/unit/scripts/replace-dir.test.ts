/**
 * `npm run build` puts dist/ in place with replaceIfChanged: builds of one
 * checkout running at the same time (two test runs) must never show a reader
 * a missing or half-written folder, and a build of unchanged sources must
 * leave the folder alone.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { replaceIfChanged, sameTree } from '../../../scripts/replace-dir.mjs';

const script = fileURLToPath(new URL('../../../scripts/replace-dir.mjs', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'tabula-replace-dir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
/** A fresh folder under this test's root holding `files` (relative path → content). */
function folder(files: Record<string, string>): string {
  const dir = join(root, `staging-${++n}`);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), content);
  }
  return dir;
}

const BUILD = { 'index.js': 'export {};\n', 'core/index.js': 'export const core = 1;\n', 'core/index.d.ts': 'export declare const core: number;\n' };

describe('replaceIfChanged', () => {
  it('moves the build in when there is none, and leaves the same build alone (same folder, staging removed)', async () => {
    const target = join(root, 'dist-a');
    const first = folder(BUILD);
    expect(await replaceIfChanged(first, target, join(root, 'lock-a'))).toBe(true);
    expect(readFileSync(join(target, 'core/index.js'), 'utf8')).toBe(BUILD['core/index.js']);
    const inode = statSync(target).ino;
    const again = folder(BUILD);
    expect(await replaceIfChanged(again, target, join(root, 'lock-a'))).toBe(false);
    expect(statSync(target).ino).toBe(inode);
    expect(existsSync(first) || existsSync(again) || existsSync(join(root, 'lock-a'))).toBe(false);
  });

  it('replaces the folder whole when one byte, one file more or one file less differs', async () => {
    const target = join(root, 'dist-b');
    await replaceIfChanged(folder(BUILD), target, join(root, 'lock-b'));
    for (const changed of [
      { ...BUILD, 'index.js': 'export {};\n\n' },
      { ...BUILD, 'extra.js': '' },
      { 'index.js': BUILD['index.js'], 'core/index.js': BUILD['core/index.js'] },
    ]) {
      expect(sameTree(folder(changed), target)).toBe(false);
      expect(await replaceIfChanged(folder(changed), target, join(root, 'lock-b'))).toBe(true);
      expect(sameTree(folder(changed), target)).toBe(true);
    }
    // No staging or old copy is left beside it.
    expect(readdirSync(root).filter((name) => name.endsWith('-old'))).toEqual([]);
  });

  it('takes over a lock whose holder has died', async () => {
    const lock = join(root, 'lock-c');
    const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
    mkdirSync(lock);
    writeFileSync(join(lock, 'pid'), dead.stdout.trim());
    expect(await replaceIfChanged(folder(BUILD), join(root, 'dist-c'), lock)).toBe(true);
    expect(existsSync(lock)).toBe(false);
  });

  it('builders of the same sources in four processes at once: one moves its build in, and a reader never misses a file', { timeout: 120_000 }, async () => {
    const target = join(root, 'dist-d');
    const lock = join(root, 'lock-d');
    const stagings = [0, 1, 2, 3].map(() => folder(BUILD));
    await replaceIfChanged(folder({ 'stale.js': 'from an older build' }), target, lock);
    const code = `import { replaceIfChanged } from ${JSON.stringify(script)}; console.log(await replaceIfChanged(process.argv[1], ${JSON.stringify(target)}, ${JSON.stringify(lock)}));`;
    const builders = stagings.map(
      (staging) =>
        new Promise<string>((resolve, reject) => {
          const child = spawn(process.execPath, ['--input-type=module', '-e', code, staging], { stdio: ['ignore', 'pipe', 'inherit'] });
          let out = '';
          child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
          child.once('error', reject);
          child.once('exit', (status) => (status === 0 ? resolve(out.trim()) : reject(new Error(`builder exited ${status}`))));
        }),
    );
    // Once the new build is in, a reader reads it whole until every builder is done.
    const done = Promise.all(builders);
    let finished = false;
    void done.finally(() => (finished = true));
    const misses: string[] = [];
    while (!finished) {
      if (existsSync(join(target, 'index.js'))) {
        for (const file of Object.keys(BUILD)) {
          try {
            if (readFileSync(join(target, file), 'utf8') !== BUILD[file as keyof typeof BUILD]) misses.push(`${file}: other bytes`);
          } catch (error) {
            misses.push(`${file}: ${(error as Error).message}`);
          }
        }
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect((await done).sort()).toEqual(['false', 'false', 'false', 'true']);
    expect(misses).toEqual([]);
    expect(sameTree(folder(BUILD), target)).toBe(true);
  });
});
