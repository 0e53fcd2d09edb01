/**
 * `npm run docs` first checks the Markdown's relative links as GitHub renders them
 * (scripts/check-doc-links.mjs): a page read on GitHub or npm must not link to a missing file or
 * heading, whatever the docs site makes of it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { anchorsOf, brokenLinks, githubSlug, linksOf, markdownPages } from '../../../scripts/check-doc-links.mjs';

const root = mkdtempSync(join(tmpdir(), 'tabula-doc-links-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
/** A fresh repository folder holding `files` (relative path → content). */
function repo(files: Record<string, string>): string {
  const dir = join(root, `repo-${++n}`);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), content);
  }
  return dir;
}

describe('githubSlug and anchorsOf', () => {
  it('slug headings as GitHub does: punctuation dropped, each space a hyphen, repeats numbered', () => {
    expect(githubSlug('Sync: the same sessions on every device')).toBe('sync-the-same-sessions-on-every-device');
    expect(githubSlug('Errors — and guarantees')).toBe('errors--and-guarantees');
    expect(githubSlug('React & hooks')).toBe('react--hooks');
    const anchors = anchorsOf('# Title\n\n## LangGraph: `TabulaCheckpointSaver`\n\n## Limits\n\n## Limits\n\n<a id="custom"></a>\n');
    expect([...anchors]).toEqual(['title', 'langgraph-tabulacheckpointsaver', 'limits', 'limits-1', 'custom']);
  });

  it('ignore headings and links inside fenced code', () => {
    const page = '# Page\n\n```ts\n# not a heading\nconst a = [x](y);\n```\n\nSee [z](./z.md).\n';
    expect([...anchorsOf(page)]).toEqual(['page']);
    expect(linksOf(page)).toEqual([{ line: 8, target: './z.md' }]);
  });
});

describe('brokenLinks', () => {
  it('accepts links to files and headings that exist, and leaves external links alone', () => {
    const dir = repo({
      'README.md': '# Tabula\n\n## Install\n\nSee [the guide](docs/guide/sessions.md#limits), [install](#install), ![shot](docs/images/a.png) and [npm](https://www.npmjs.com/).\n',
      'docs/guide/sessions.md': '# Sessions\n\n## Limits\n\nBack to the [README](../../README.md#install).\n',
      'docs/images/a.png': '',
    });
    expect(brokenLinks(dir, markdownPages(dir))).toEqual([]);
  });

  it('names each missing file and each missing heading with its page and line', () => {
    const dir = repo({
      'README.md': '# Tabula\n\nSee [gone](docs/gone.md).\n\nAnd [nope](#nope).\n',
      'docs/guide/sync.md': '# Sync\n\n[bad](../../README.md#install) [out](../../../elsewhere.md)\n',
    });
    expect(brokenLinks(dir, markdownPages(dir))).toEqual([
      'README.md:3: docs/gone.md: no file docs/gone.md; fix the path or add the file.',
      'README.md:5: #nope: README.md has no heading or anchor "nope" (GitHub\'s slug of a heading: lower case, punctuation dropped, spaces as hyphens).',
      'docs/guide/sync.md:3: ../../README.md#install: README.md has no heading or anchor "install" (GitHub\'s slug of a heading: lower case, punctuation dropped, spaces as hyphens).',
      'docs/guide/sync.md:3: ../../../elsewhere.md points outside the repository; link to a file in it or use a full URL.',
    ]);
  });
});
