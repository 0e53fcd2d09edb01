/**
 * Runs every ```ts block of the README, so the documented API cannot drift
 * from the real one. Imports of 'tabula-sdk' and 'tabula-sdk/core' are pointed at
 * the sources; a line `expression; // => value` becomes a deep-equality
 * check. A block whose info string says `no-run` is skipped.
 *
 * Each block runs twice, on the same databases, because a reader pastes an
 * example into a page again: a second run must neither throw (say
 * `session/exists`) nor change a checked value.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
// Per process: a run beside this one (same checkout) must not delete these files while they are imported.
const tmp = `${root}test/.tmp/readme-${process.pid}/`;
// TABULA_README runs another file's blocks the same way (a helper's docs/readme/<name>.md before the merge).
const readme = readFileSync(process.env.TABULA_README ?? `${root}README.md`, 'utf8');

interface Block {
  readonly line: number;
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

function extractBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
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
        body.push(`${check[1]}globalThis.__readmeCheck((${check[2]}), (${check[3]}), ${i + 1});`);
      } else {
        body.push(line.replace(/from '(tabula-sdk(?:\/[\w-]+)?)'/, (whole, name: string) => (entries[name] ? `from '${entries[name]}'` : whole)));
      }
    }
    blocks.push({ line: start, code: `${body.join('\n')}\nexport {};\n`, checks });
  }
  return blocks;
}

const blocks = extractBlocks(readme);
const seen: number[] = [];
(globalThis as { __readmeCheck?: unknown }).__readmeCheck = (actual: unknown, expected: unknown, line: number) => {
  seen.push(line);
  expect(actual, `README.md line ${line}`).toEqual(expected);
};

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('README examples', () => {
  it('has examples to run', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(5);
  });

  it.each(blocks.map((block) => [block.line, block] as const))('block at line %i runs, twice, and its checks hold', async (_line, block) => {
    mkdirSync(tmp, { recursive: true });
    for (const run of [1, 2]) {
      // A module runs once per URL, so the second run is a second file.
      const file = `${tmp}block-${block.line}-run-${run}.ts`;
      writeFileSync(file, block.code);
      const before = seen.length;
      await import(/* @vite-ignore */ file);
      // Every `// =>` line must actually have run (a check inside an untaken branch would prove nothing).
      expect(seen.length - before, `checks of run ${run}`).toBe(block.checks);
    }
    // The first block that imports a framework (LangGraph, the Agents SDK) loads it cold: slow on a loaded machine, not a failure.
  }, 60_000);
});
