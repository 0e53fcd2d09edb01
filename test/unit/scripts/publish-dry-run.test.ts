/**
 * The publish dry run of `npm run check:package` must fail when the package would go out incomplete:
 * npm itself publishes a package without its build and exits 0. Fixture packages in a folder of this
 * run's own stand in for `tabula-sdk`, so the real npm is run without racing the real build.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { missingFiles, packedFiles, requiredFiles } from '../../../scripts/publish-dry-run.mjs';

const script = fileURLToPath(new URL('../../../scripts/publish-dry-run.mjs', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'tabula-publish-dry-run-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const MANIFEST = {
  name: 'fixture-pkg',
  version: '1.0.0',
  type: 'module',
  files: ['dist', 'CHANGELOG.md'],
  types: './dist/index.d.ts',
  exports: {
    '.': { types: './dist/index.d.ts', default: './dist/index.js' },
    './worker': { types: './dist/worker.d.ts', default: './dist/worker.js' },
    './package.json': './package.json',
  },
  bin: { 'fixture-cli': './dist/cli.js' },
};
const COMPLETE = {
  'LICENSE': 'MIT\n',
  'README.md': '# fixture\n',
  'CHANGELOG.md': '# Changelog\n',
  'dist/index.js': 'export {};\n',
  'dist/index.d.ts': 'export {};\n',
  'dist/worker.js': 'export {};\n',
  'dist/worker.d.ts': 'export {};\n',
  'dist/cli.js': '#!/usr/bin/env node\n',
};

let n = 0;
/** A fixture package holding `files` (path → content) beside MANIFEST. */
function fixture(files: Record<string, string>): string {
  const dir = join(root, `pkg-${++n}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify(MANIFEST));
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), content);
  }
  return dir;
}

function run(dir: string): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [script, dir], { encoding: 'utf8' });
  return { status: result.status, output: result.stdout + result.stderr };
}

describe('publish-dry-run', () => {
  it('requires every exports, types and bin target of our package.json, and the root entry, LICENSE, README and CHANGELOG', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as Record<string, unknown>;
    const required = requiredFiles(manifest);
    for (const file of ['LICENSE', 'README.md', 'CHANGELOG.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/server/cli.js', 'dist/tokens/o200k-worker.js', 'dist/tokens/cl100k-worker.d.ts', 'dist/react/index.js']) {
      expect(required).toContain(file);
    }
    expect(required.every((file) => !file.startsWith('./'))).toBe(true);
  });

  it('walks conditions and fallbacks, skips blocked exports, and matches `*` patterns against the packed paths', () => {
    const manifest = {
      exports: {
        '.': [{ import: { types: './dist/a.d.ts', default: './dist/a.js' } }, './dist/a.cjs'],
        './internal/*': null,
        './features/*': './dist/features/*.js',
      },
      main: 'dist/a.cjs',
    };
    const base = ['package.json', 'LICENSE', 'README.md', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts', 'dist/a.js', 'dist/a.d.ts', 'dist/a.cjs'];
    expect(requiredFiles(manifest)).toEqual([...base, 'dist/features/*.js'].sort());
    expect(missingFiles(manifest, [...base, 'dist/features/x/y.js'])).toEqual([]);
    expect(missingFiles(manifest, [...base, 'dist/features.js', 'dist/featuresXjs'])).toEqual(['dist/features/*.js']);
    expect(missingFiles(manifest, [...base.filter((file) => file !== 'CHANGELOG.md' && file !== 'dist/a.d.ts'), 'dist/features/x.js'])).toEqual([
      'CHANGELOG.md',
      'dist/a.d.ts',
    ]);
  });

  it("reads npm 11's report (keyed by package name) and npm 10's (the report itself), and refuses one without a file list", () => {
    const report = { id: 'p@1.0.0', files: [{ path: 'LICENSE', size: 1, mode: 420 }] };
    expect(packedFiles(JSON.stringify({ p: report }), 'p')).toEqual({ id: 'p@1.0.0', paths: ['LICENSE'] });
    expect(packedFiles(JSON.stringify(report), 'p')).toEqual({ id: 'p@1.0.0', paths: ['LICENSE'] });
    expect(() => packedFiles(JSON.stringify({ other: report }), 'p')).toThrow(/no file list for p/);
  });

  it('passes a complete package and fails, naming each missing file, one published without its build or CHANGELOG', { timeout: 60_000 }, () => {
    const complete = run(fixture(COMPLETE));
    expect(complete.output).toContain('fixture-pkg@1.0.0');
    expect(complete.status).toBe(0);

    const { 'dist/worker.d.ts': _types, 'dist/cli.js': _cli, ...withoutTwo } = COMPLETE;
    const partial = run(fixture(withoutTwo));
    expect(partial.output).toContain('npm publish would upload fixture-pkg@1.0.0 without:\n  dist/cli.js\n  dist/worker.d.ts\n');
    expect(partial.status).toBe(1);

    const { 'CHANGELOG.md': _changelog, ...unbuilt } = Object.fromEntries(Object.entries(COMPLETE).filter(([file]) => !file.startsWith('dist/')));
    const bare = run(fixture(unbuilt));
    expect(bare.output).toMatch(/without:\n {2}CHANGELOG\.md\n {2}dist\/cli\.js\n/);
    expect(bare.output).toContain('Build first');
    expect(bare.status).toBe(1);
  });
});
