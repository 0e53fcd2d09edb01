/**
 * Runs every ```ts block of the README and of every guide page
 * (`docs/guide/*.md`), so the documented API cannot drift from the real one.
 * Imports of 'tabula-sdk' and its subpaths are pointed at the sources; a line
 * `expression; // => value` becomes a deep-equality check. A block whose info
 * string says `no-run` is skipped (say why after it: `no-run (needs …)`).
 * Each test is named by its file and line (`docs/guide/sessions.md:12`).
 *
 * Each block runs twice, on the same databases, because a reader pastes an
 * example into a page again: a second run must neither throw (say
 * `session/exists`) nor change a checked value.
 */
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
// Per process: a run beside this one (same checkout) must not delete these files while they are imported.
const tmp = `${root}test/.tmp/readme-${process.pid}/`;

/** The documents whose examples run: the README, then the guide's pages in name order. */
const guide = readdirSync(`${root}docs/guide`)
  .filter((name) => name.endsWith('.md'))
  .sort()
  .map((name) => `docs/guide/${name}`);
// TABULA_README runs one other file's blocks the same way (a draft page before it is committed).
const documents = process.env.TABULA_README ? [process.env.TABULA_README] : ['README.md', ...guide];

interface Block {
  /** `file:line` of the block's first line of code. */
  readonly where: string;
  readonly code: string;
  readonly checks: number;
}

const entries: Record<string, string> = {
  'tabula-sdk/core': `${root}src/core/index.ts`,
  'tabula-sdk': `${root}src/index.ts`,
  'tabula-sdk/langgraph': `${root}src/langgraph/index.ts`,
  'tabula-sdk/openai-agents': `${root}src/openai-agents/index.ts`,
  'tabula-sdk/react': `${root}src/react/index.ts`,
  'tabula-sdk/server': `${root}src/server/index.ts`,
  'tabula-sdk/sync': `${root}src/sync/index.ts`,
};

function extractBlocks(file: string, markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    // A fence may be indented (a block inside a list item); its lines lose that indent.
    const fence = /^(\s*)```ts(.*)$/.exec(lines[i] ?? '');
    if (!fence) continue;
    const indent = fence[1]?.length ?? 0;
    const skip = fence[2]?.includes('no-run') ?? false;
    const start = i + 1;
    const body: string[] = [];
    let checks = 0;
    for (i = start; i < lines.length && (lines[i] ?? '').trim() !== '```'; i++) {
      const line = (lines[i] ?? '').slice(indent);
      const check = /^(\s*)(.+?);\s*\/\/ => (.+)$/.exec(line);
      if (check) {
        checks++;
        body.push(`${check[1]}globalThis.__readmeCheck((${check[2]}), (${check[3]}), '${file}:${i + 1}');`);
      } else {
        body.push(line.replace(/from '(tabula-sdk(?:\/[\w-]+)?)'/, (whole, name: string) => (entries[name] ? `from '${entries[name]}'` : whole)));
      }
    }
    if (!skip) blocks.push({ where: `${file}:${start}`, code: `${body.join('\n')}\nexport {};\n`, checks });
  }
  return blocks;
}

const perDocument = documents.map((file) => ({ file, blocks: extractBlocks(file, readFileSync(`${root}${file}`, 'utf8')) }));
const seen: string[] = [];
(globalThis as { __readmeCheck?: unknown }).__readmeCheck = (actual: unknown, expected: unknown, where: string) => {
  seen.push(where);
  expect(actual, where).toEqual(expected);
};

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('documented examples', () => {
  it('finds the README, the guide pages and their examples', () => {
    if (process.env.TABULA_README) return;
    expect(guide.length, 'guide pages').toBeGreaterThanOrEqual(9);
    const count = (file: string) => perDocument.find((document) => document.file === file)?.blocks.length ?? 0;
    expect(count('README.md'), 'README.md blocks').toBeGreaterThanOrEqual(1);
    expect(guide.reduce((sum, file) => sum + count(file), 0), 'guide blocks').toBeGreaterThanOrEqual(20);
  });
});

// A page without examples (the guide's index, the demo) has nothing to run here.
for (const { file, blocks } of perDocument.filter((document) => document.blocks.length > 0)) {
  describe(`${file} examples`, () => {
    it.each(blocks.map((block) => [block.where, block] as const))('block at %s runs, twice, and its checks hold', async (_where, block) => {
      mkdirSync(tmp, { recursive: true });
      for (const run of [1, 2]) {
        // A module runs once per URL, so the second run is a second file.
        const name = `${tmp}${block.where.replace(/[/:.]/g, '-')}-run-${run}.ts`;
        writeFileSync(name, block.code);
        const before = seen.length;
        await import(/* @vite-ignore */ name);
        // Every `// =>` line must actually have run (a check inside an untaken branch would prove nothing).
        expect(seen.length - before, `checks of run ${run}`).toBe(block.checks);
      }
      // The first block that imports a framework (LangGraph, the Agents SDK) loads it cold: slow on a loaded machine, not a failure.
    }, 60_000);
  });
}
