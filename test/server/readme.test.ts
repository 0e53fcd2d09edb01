/**
 * Runs every ```ts block of docs/readme/server.md (the README's "Sync server"
 * section) the way test/unit/readme.test.ts runs README.md: `tabula-sdk/*`
 * imports point at the sources, `expression; // => value` lines become
 * deep-equality checks, blocks marked `no-run` are skipped.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const tmp = `${root}test/.tmp/readme-server-${process.pid}/`;
const markdown = readFileSync(`${root}docs/readme/server.md`, 'utf8');
const entries: Record<string, string> = {
  'tabula-sdk': `${root}src/index.ts`,
  'tabula-sdk/core': `${root}src/core/index.ts`,
  'tabula-sdk/sync': `${root}src/sync/index.ts`,
  'tabula-sdk/server': `${root}src/server/index.ts`,
};

const blocks: { line: number; code: string; checks: number }[] = [];
const lines = markdown.split('\n');
for (let i = 0; i < lines.length; i++) {
  const fence = /^```ts(.*)$/.exec(lines[i] ?? '');
  if (!fence || fence[1]?.includes('no-run')) continue;
  const start = i + 1;
  const body: string[] = [];
  let checks = 0;
  for (i = start; i < lines.length && lines[i] !== '```'; i++) {
    const line = lines[i] ?? '';
    const check = /^(\s*)(.+?);\s*\/\/ => (.+)$/.exec(line);
    if (check) {
      checks++;
      body.push(`${check[1]}globalThis.__serverReadmeCheck((${check[2]}), (${check[3]}), ${i + 1});`);
    } else {
      body.push(line.replace(/from '(tabula-sdk(?:\/\w+)?)'/, (_m, name: string) => `from '${entries[name] ?? name}'`));
    }
  }
  blocks.push({ line: start, code: `${body.join('\n')}\nexport {};\n`, checks });
}

const seen: number[] = [];
(globalThis as { __serverReadmeCheck?: unknown }).__serverReadmeCheck = (actual: unknown, expected: unknown, line: number) => {
  seen.push(line);
  expect(actual, `docs/readme/server.md line ${line}`).toEqual(expected);
};
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

it('has runnable examples', () => {
  expect(blocks.length).toBeGreaterThanOrEqual(1);
});

it.each(blocks.map((block) => [block.line, block] as const))('block at line %i runs and its checks hold', async (_line, block) => {
  mkdirSync(tmp, { recursive: true });
  const file = `${tmp}block-${block.line}.ts`;
  writeFileSync(file, block.code);
  const before = seen.length;
  await import(/* @vite-ignore */ file);
  expect(seen.length - before).toBe(block.checks);
});
