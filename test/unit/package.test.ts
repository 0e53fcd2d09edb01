/**
 * The published shape: `npm run build` emits ESM with declarations, and the
 * exports map resolves `tabula` and `tabula/core` for a consumer in Node.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
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
});
