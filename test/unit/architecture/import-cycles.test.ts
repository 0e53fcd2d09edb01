/**
 * The source has no import cycles among its runtime imports (docs/architecture.md, Layers): a cycle
 * makes module evaluation order depend on which module a bundler or test reaches first, and a
 * `const` read before its module ran is a TDZ error that shows only in some entry points. Type-only
 * imports (`import type`, or every name marked `type`) are erased and may form cycles; dynamic
 * `import()` is a deliberate lazy edge and is not followed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const src = join(root, 'src');

/** Every .ts file under src, as a path relative to the repository. */
function sources(): string[] {
  return readdirSync(src, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => relative(root, join(src, file)).replaceAll('\\', '/'));
}

const STATIC_IMPORT = /^(?:import|export)\s+(type\s+)?(?:([^'";]*?)\s*from\s*)?'(\.[^']+)'/gm;

/** The files `file` imports at run time (relative imports only; packages cannot import back into src). */
export function runtimeImports(file: string, text: string): string[] {
  const out: string[] = [];
  for (const match of text.matchAll(STATIC_IMPORT)) {
    const [, typeOnly, names = '', specifier = ''] = match;
    if (typeOnly) continue;
    const braces = /^\{([^}]*)\}$/.exec(names.trim());
    // `import { type A, type B } from` is erased too.
    if (braces && braces[1]!.split(',').map((name) => name.trim()).filter(Boolean).every((name) => name.startsWith('type '))) continue;
    out.push(normalize(join(dirname(file), specifier.replace(/\.js$/, '.ts'))).replaceAll('\\', '/'));
  }
  return out;
}

/** The strongly connected components of more than one file (or a file importing itself): the cycles. */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    indices.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!indices.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, indices.get(next)!));
    }
    if (low.get(node) === indices.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!indices.has(node)) visit(node);
  return found;
}

describe('import cycles', () => {
  it('finds a cycle when there is one (the check can fail)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(cyclesOf(graph)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
    expect(runtimeImports('src/x/a.ts', "import { type A } from './b.js';\nimport type { C } from './c.js';\nimport { d } from '../d.js';\nexport { e } from './e.js';\nimport './f.js';"))
      .toEqual(['src/d.ts', 'src/x/e.ts', 'src/x/f.ts']);
  });

  it('src has none among its runtime imports', () => {
    const files = sources();
    const graph = new Map(files.map((file) => [file, runtimeImports(file, readFileSync(join(root, file), 'utf8'))]));
    expect(files.length).toBeGreaterThan(100);
    expect(cyclesOf(graph)).toEqual([]);
  });
});
