/**
 * The published shape: `npm run build` emits ESM with declarations, and the
 * exports map resolves `tabula` and `tabula/core` for a consumer in Node.
 * The framework integrations are subpaths that an app importing only the
 * root never bundles.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('package', () => {
  beforeAll(() => {
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'pipe' });
  }, 120_000);

  it('declares ESM, no side effects, and typed entry points', () => {
    const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
      type: string;
      sideEffects: boolean;
      exports: Record<string, { types: string; import: string }>;
    };
    expect(pkg.type).toBe('module');
    expect(pkg.sideEffects).toBe(false);
    for (const entry of ['.', './core']) {
      const target = pkg.exports[entry];
      expect(target, entry).toBeDefined();
      expect(existsSync(`${root}${target!.types}`), target!.types).toBe(true);
      expect(existsSync(`${root}${target!.import}`), target!.import).toBe(true);
    }
  });

  it('resolves by package name from the built output, in plain Node', () => {
    const script = [
      "const core = await import('tabula-sdk/core');",
      "const root = await import('tabula-sdk');",
      "const ctx = new core.WorkingContext({ messages: [{ role: 'user', content: 'hi' }] });",
      'console.log(JSON.stringify([ctx.messages.length, root.WorkingContext === core.WorkingContext]));',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual([1, true]);
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
    const app = `${root}test/.tmp/bundle-root-only/`;
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
