/**
 * The bundle-size check must be able to fail: a fixture package stands in
 * for `tabula-sdk` so the measurement is exercised without racing the real
 * build, and the peers are shown to be left out of the budgeted figure.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ENTRIES, formatTable, measureBundles, overBudget } from '../../../scripts/check-size.mjs';

// Per process: a run beside this one (same checkout) must not rewrite or delete this fixture while it is measured.
const fixture = fileURLToPath(new URL(`../../.tmp/check-size-${process.pid}/`, import.meta.url));

afterAll(() => rmSync(fixture, { recursive: true, force: true }));

function writeFixture(coreBytes: number, yjs: 'static' | 'dynamic' = 'dynamic'): void {
  mkdirSync(fixture, { recursive: true });
  writeFileSync(
    `${fixture}package.json`,
    JSON.stringify({ name: 'tabula-sdk', type: 'module', exports: { '.': './index.js', './core': './core.js' } }),
  );
  // Random hex does not compress below half its length, so the gzip size is known from below.
  writeFileSync(`${fixture}core.js`, `export class WorkingContext { static blob = '${randomBytes(coreBytes / 2).toString('hex')}'; }\n`);
  // The root entry uses yjs, a peer: it counts in the total, not in the budgeted figure. Loaded on first use, as
  // Tabula does, it is not in what a page loads at start.
  writeFileSync(
    `${fixture}index.js`,
    yjs === 'static'
      ? "import * as Y from 'yjs';\nexport function openTabula() { return new Y.Doc(); }\n"
      : "export async function openTabula() { const Y = await import('yjs'); return new Y.Doc(); }\n",
  );
}

describe('check-size', () => {
  it('budgets the two documented imports', () => {
    expect(ENTRIES.map((entry) => [entry.name, entry.budgetBytes])).toEqual([
      ["import { WorkingContext } from 'tabula-sdk/core'", 14 * 1024],
      ["import { openTabula } from 'tabula-sdk'", 70 * 1024],
    ]);
    expect(ENTRIES[1]!.lazy).toEqual(expect.arrayContaining(['yjs', 'y-indexeddb', 'y-protocols', 'lib0']));
  });

  it('reports an entry over budget, and leaves the peers out of the budgeted figure', async () => {
    writeFixture(40 * 1024);
    const [core, root] = await measureBundles(fixture);
    expect(core!.gzipBytes).toBeGreaterThan(14 * 1024);
    expect(root!.gzipBytes).toBeLessThan(1024);
    expect(root!.totalGzipBytes).toBeGreaterThan(10 * 1024); // Yjs itself
    expect(overBudget([core!, root!])).toEqual([expect.stringContaining("tabula-sdk/core'") as string]);
    expect(formatTable([core!, root!])).toContain('| 14.0 KB |');
  });

  it('reports Yjs loaded at start by the root entry (it must load when a blackboard is first used)', async () => {
    writeFixture(1024, 'static');
    const [, root] = await measureBundles(fixture);
    expect(root!.eager).toEqual(['yjs', 'lib0']);
    expect(root!.startGzipBytes).toBeGreaterThan(10 * 1024);
    expect(overBudget([root!])).toEqual([expect.stringContaining('a page loads yjs, lib0 at start') as string]);
  });

  it('does not count a dynamically imported Yjs in what a page loads at start', async () => {
    writeFixture(1024, 'dynamic');
    const [, root] = await measureBundles(fixture);
    expect(root!.eager).toEqual([]);
    expect(root!.startGzipBytes).toBeLessThan(1024);
  });

  it('passes entries within budget', async () => {
    writeFixture(1024);
    expect(overBudget(await measureBundles(fixture))).toEqual([]);
  });
});
