/**
 * The docs site is built by one command in three places: `npm run docs`, the step `npm test` runs, and
 * the GitHub Pages workflow's build step; and its reference covers every public entry point. These
 * checks keep the three from drifting apart and a new export from going undocumented.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import config from '../../typedoc.config.js';
import { openingComment, specifiersBySource } from '../../scripts/typedoc-plugin.mjs';

const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  name: string;
  exports: Record<string, unknown>;
  scripts: Record<string, string>;
};
const workflow = readFileSync(new URL('../../.github/workflows/docs.yml', import.meta.url), 'utf8');

describe('the docs site', () => {
  it('documents every entry point of package.json exports, each under its import specifier', () => {
    const names = specifiersBySource(manifest);
    expect([...names.values()].sort()).toEqual(
      Object.keys(manifest.exports)
        .filter((specifier) => specifier !== './package.json')
        .map((specifier) => (specifier === '.' ? manifest.name : `${manifest.name}/${specifier.slice(2)}`))
        .sort(),
    );
    // The root goes last: TypeDoc documents a re-exported symbol under the first entry that exports it.
    expect([...(config.entryPoints ?? [])].sort()).toEqual([...names.keys()].sort());
    expect(config.entryPoints?.at(-1)).toBe('src/index.ts');
    expect(names.get('src/sync/index.ts')).toBe('tabula-sdk/sync');
    expect(names.get('src/tokens/o200k-worker.ts')).toBe('tabula-sdk/token-worker/o200k_base');
  });

  it("gives each entry module the paragraph its file opens with, code blocks' indentation kept", () => {
    expect(openingComment('/**\n * `tabula-sdk/x`: what it owns.\n *\n * ```ts\n * if (a) {\n *   b();\n * }\n * ```\n */\nexport {};\n')).toBe(
      '`tabula-sdk/x`: what it owns.\n\n```ts\nif (a) {\n  b();\n}\n```',
    );
    expect(openingComment("import 'x';\n/** Not an opening comment. */\n")).toBe('');
    expect(openingComment(readFileSync(new URL('../../src/tokens/o200k-worker.ts', import.meta.url), 'utf8'))).toMatch(/^The token worker for o200k_base/);
  });

  it('is built by npm test and by the Pages workflow with the same command, into the folder the workflow uploads', () => {
    expect(manifest.scripts.test).toContain('npm run docs');
    expect(workflow).toMatch(/^\s+- run: npm ci\b/m);
    expect(workflow).toMatch(/^\s+- run: npm run docs$/m);
    expect(workflow).toMatch(/uses: actions\/upload-pages-artifact@v\d+\n\s+with:\n\s+path: (\S+)/);
    expect(/uses: actions\/upload-pages-artifact@v\d+\n\s+with:\n\s+path: (\S+)/.exec(workflow)?.[1]).toBe(config.out);
    expect(workflow).toContain('uses: actions/deploy-pages@v');
    expect(config.treatWarningsAsErrors).toBe(true);
  });
});
