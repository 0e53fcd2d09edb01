/**
 * The published shape: `npm run build` emits ESM with declarations, the
 * exports map resolves `tabula-sdk` and `tabula-sdk/core` for a consumer in
 * Node (through `import` and `require`), the tarball carries what a user
 * needs, and the dependencies let an app share one copy of yjs and dexie.
 * The framework integrations are subpaths that an app importing only the
 * root never bundles.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface PackageJson {
  type: string;
  sideEffects: boolean;
  types: string;
  keywords: string[];
  license: string;
  engines: { node: string };
  exports: Record<string, { types: string; default: string } | string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  devDependencies: Record<string, string>;
}

const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as PackageJson;
const PEERS = ['dexie', 'y-protocols', 'yjs'];

describe('package', () => {
  beforeAll(() => {
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'pipe' });
  }, 120_000);

  it('declares ESM, no side effects, and typed entry points under the default condition', () => {
    expect(pkg.type).toBe('module');
    expect(pkg.sideEffects).toBe(false);
    expect(existsSync(`${root}${pkg.types}`), pkg.types).toBe(true);
    expect(Object.keys(pkg.exports)).toEqual(expect.arrayContaining(['.', './core', './package.json']));
    for (const [entry, target] of Object.entries(pkg.exports)) {
      if (entry === './package.json') continue;
      if (typeof target !== 'object') throw new Error(`exports["${entry}"] must be a conditions object`);
      // `default`, not `import`: require() of an ES module works from Node 20.19, and only matches `default`.
      expect(Object.keys(target), entry).toEqual(['types', 'default']);
      expect(existsSync(`${root}${target.types}`), target.types).toBe(true);
      expect(existsSync(`${root}${target.default}`), target.default).toBe(true);
    }
  });

  it('resolves by package name from the built output, in plain Node, through import', () => {
    const script = [
      "const core = await import('tabula-sdk/core');",
      "const root = await import('tabula-sdk');",
      "const ctx = new core.WorkingContext({ messages: [{ role: 'user', content: 'hi' }] });",
      'console.log(JSON.stringify([ctx.messages.length, root.WorkingContext === core.WorkingContext]));',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual([1, true]);
  });

  it('resolves through require() on Node >= 20.19 (the engines floor)', () => {
    expect(pkg.engines.node).toBe('>=20.19');
    const script = [
      "const core = require('tabula-sdk/core');",
      "const root = require('tabula-sdk');",
      "const ctx = new core.WorkingContext({ messages: [{ role: 'user', content: 'hi' }] });",
      'console.log(JSON.stringify([ctx.messages.length, typeof root.openTabula, root.WorkingContext === core.WorkingContext]));',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--no-warnings', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual([1, 'function', true]);
  });

  it('packs the license, changelog, readme and every built entry and worker', () => {
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' })) as [
      { name: string; files: { path: string }[] },
    ];
    expect(packed.name).toBe('tabula-sdk');
    const files = new Set(packed.files.map((file) => file.path));
    for (const file of ['LICENSE', 'CHANGELOG.md', 'README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/core/index.js', 'dist/core/index.d.ts']) {
      expect(files.has(file), `${file} in the tarball`).toBe(true);
    }
    expect([...files].some((file) => /^dist\/tokens\/.*worker.*\.js$/.test(file)), 'token worker scripts in the tarball').toBe(true);
    expect([...files].some((file) => file.startsWith('test/') || file.startsWith('bench/')), 'no tests or benchmarks in the tarball').toBe(false);
    expect(readFileSync(`${root}LICENSE`, 'utf8')).toMatch(/^MIT License\n\nCopyright \(c\) 2026 Tabula contributors\n/);
    expect(pkg.license).toBe('MIT');
    expect(pkg.keywords.length).toBeGreaterThan(0);
  }, 60_000);

  it('takes yjs, y-protocols and dexie as caret-ranged peers, so an app and Tabula share one copy', () => {
    // Integrations add their framework as a peer too, always optional: an app without React must install cleanly.
    const required = Object.keys(pkg.peerDependencies).filter((name) => !pkg.peerDependenciesMeta?.[name]?.optional);
    expect(required.sort()).toEqual(PEERS);
    for (const peer of PEERS) {
      expect(pkg.peerDependencies[peer], peer).toMatch(/^\^\d+\.\d+\.\d+$/);
      // The repository still develops against one exact version of each.
      expect(pkg.devDependencies[peer], peer).toMatch(/^\d+\.\d+\.\d+$/);
      expect(pkg.dependencies[peer], `${peer} must not also be a dependency`).toBeUndefined();
    }
  });

  it('ranges the other runtime dependencies with a caret and pins every dev dependency exactly', () => {
    for (const [name, range] of Object.entries(pkg.dependencies)) expect(range, name).toMatch(/^\^\d+\.\d+\.\d+$/);
    for (const [name, version] of Object.entries(pkg.devDependencies)) expect(version, name).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
  });

  it('exports each integration as a typed subpath whose framework is an optional peer', () => {
    const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional: boolean }>;
      dependencies: Record<string, string>;
    };
    for (const entry of ['./langgraph', './openai-agents', './react']) {
      const target = pkg.exports[entry];
      expect(existsSync(`${root}${target!.types}`), target!.types).toBe(true);
      expect(existsSync(`${root}${target!.default}`), target!.default).toBe(true);
    }
    for (const peer of ['@langchain/langgraph-checkpoint', '@langchain/core', '@openai/agents-core', 'react']) {
      expect(pkg.peerDependencies[peer], peer).toBeDefined();
      expect(pkg.peerDependenciesMeta[peer]?.optional, peer).toBe(true);
      expect(pkg.dependencies[peer], peer).toBeUndefined();
    }
  });

  it('bundles none of the integrations\' frameworks into an app that imports only tabula-sdk', async () => {
    const app = `${root}test/.tmp/bundle-root-only-${process.pid}/`;
    rmSync(app, { recursive: true, force: true });
    mkdirSync(`${app}node_modules`, { recursive: true });
    // Installed the way npm links a local package: node_modules/tabula-sdk → the repository.
    symlinkSync(root, `${app}node_modules/tabula-sdk`, 'dir');
    const bundle = async (code: string) => {
      writeFileSync(`${app}main.js`, code);
      const result = await build({ entryPoints: [`${app}main.js`], bundle: true, write: false, metafile: true, format: 'esm', platform: 'browser', logLevel: 'silent' });
      return Object.keys(result.metafile.inputs);
    };
    const frameworks = /node_modules\/(react|react-dom|@langchain\/[^/]+|@openai\/[^/]+)\//;
    const rootOnly = await bundle("import { openTabula, WorkingContext } from 'tabula-sdk'; console.log(openTabula, WorkingContext);");
    expect(rootOnly.some((input) => input.includes('dist/store/tabula.js')), 'the bundle holds the store').toBe(true);
    expect(rootOnly.filter((input) => frameworks.test(input) || /dist\/(react|langgraph|openai-agents)\//.test(input))).toEqual([]);
    // The same check on an app that does import an integration finds its framework, so the one above can fail.
    const withReact = await bundle("import { useSessions } from 'tabula-sdk/react'; console.log(useSessions);");
    expect(withReact.some((input) => /node_modules\/react\//.test(input))).toBe(true);
    rmSync(app, { recursive: true, force: true });
  }, 60_000);
});
