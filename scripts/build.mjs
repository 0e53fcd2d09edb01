// @ts-check
/**
 * `npm run build`: compiles src/ into dist/ so that builds running at the same
 * time (two test runs of one checkout: check:package, test/unit/package.test.ts
 * and the consumer e2e tests each build first) never show a reader a dist/
 * that is missing or half written.
 *
 * tsc writes into a fresh staging folder beside dist/ (same depth, so the
 * source maps' relative paths are the same), which then replaces dist/ only
 * if it differs (scripts/replace-dir.mjs): a build of the same sources leaves
 * dist/ untouched while another run reads it; a build of changed sources
 * swaps the whole folder by two renames, never file by file.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { replaceIfChanged } from './replace-dir.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const staging = mkdtempSync(join(root, '.dist-staging-'));
try {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', staging], { cwd: root, stdio: 'inherit' });
  await replaceIfChanged(staging, join(root, 'dist'), join(root, '.dist-lock'));
} finally {
  rmSync(staging, { recursive: true, force: true });
}
