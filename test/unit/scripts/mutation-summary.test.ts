import { describe, expect, it } from 'vitest';
import { formatTable, markEquivalents, summarize } from '../../../scripts/mutation-summary.mjs';

const mutants = (...statuses: string[]) => ({ mutants: statuses.map((status) => ({ status })) });

describe('mutation summary', () => {
  it('scores each file and folder as detected / (detected + undetected), leaving errors and ignored out', () => {
    const { files, folders, all } = summarize({
      files: {
        'src/store/b.ts': mutants('Killed', 'Survived', 'NoCoverage', 'Timeout'),
        'src/store/a.ts': mutants('Killed', 'Killed', 'Ignored', 'CompileError'),
        'src/core/c.ts': mutants('Survived'),
      },
    });
    expect(files.map((f) => f.name)).toEqual(['src/core/c.ts', 'src/store/a.ts', 'src/store/b.ts']);
    expect(files[1]).toMatchObject({ killed: 2, ignored: 1, errors: 1, total: 2, score: 100 });
    expect(files[2]).toMatchObject({ killed: 1, timeout: 1, survived: 1, noCoverage: 1, total: 4, score: 50 });
    expect(folders).toMatchObject([{ name: 'src/core', total: 1, score: 0 }, { name: 'src/store', total: 6, score: (100 * 4) / 6 }]);
    expect(all).toMatchObject({ total: 7, score: (100 * 4) / 7 });
    expect(formatTable([all])).toMatch(/^ +score +killed .*\nall +57\.1 +3 +1 +2 +1 +7 +0$/);
  });

  it('counts a listed equivalent survivor out of the score, matched by file, mutator, replacement and line text', () => {
    const at = (line: number) => ({ start: { line } });
    const report = {
      files: {
        'src/store/a.ts': {
          source: 'const x = 1;\n  if (a < b) return;\n',
          mutants: [
            { status: 'Survived', mutatorName: 'EqualityOperator', replacement: 'a <= b', location: at(2) },
            { status: 'Survived', mutatorName: 'ConditionalExpression', replacement: 'true', location: at(2) },
            { status: 'Killed', mutatorName: 'EqualityOperator', replacement: 'a >= b', location: at(2) },
          ],
        },
      },
    };
    const listed = [
      { file: 'store/a.ts', mutator: 'EqualityOperator', replacement: 'a <= b', line: 'if (a < b) return;', reason: 'r' },
      { file: 'store/a.ts', mutator: 'EqualityOperator', replacement: 'a >= b', line: 'if (a < b) return;', reason: 'killed, so not equivalent' },
      { file: 'store/b.ts', mutator: 'EqualityOperator', replacement: 'a <= b', line: 'if (a < b) return;', reason: 'another file' },
    ];
    const unused = markEquivalents(report, listed);
    expect(unused).toEqual([listed[1], listed[2]]);
    expect(summarize(report).files[0]).toMatchObject({ equivalent: 1, survived: 1, killed: 1, total: 2, score: 50 });
  });
});
