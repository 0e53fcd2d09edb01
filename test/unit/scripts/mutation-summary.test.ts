import { describe, expect, it } from 'vitest';
import { formatTable, summarize } from '../../../scripts/mutation-summary.mjs';

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
    expect(formatTable([all])).toMatch(/^ +score +killed .*\nall +57\.1 +3 +1 +2 +1 +7$/);
  });
});
