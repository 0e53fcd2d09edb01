// @ts-check
/**
 * Checks the relative links in the repository's Markdown (README.md, CONTRIBUTING.md, CHANGELOG.md
 * and everything under docs/) as GitHub renders them: the file a link names exists beside the page,
 * and a `#fragment` names a heading (GitHub's slug of it) or an `id`/`name` anchor of the page it
 * points into. Exits 1 naming each broken link with its file and line.
 *
 * TypeDoc checks the same links as the docs site renders them (`npm run docs`), but only in the
 * pages it publishes, and with its own slugs; a page read on GitHub or npm must work too, and the
 * two slug rules differ for a heading with a dash or an ampersand between spaces. External links
 * (`https:`, `mailto:`) are not fetched: a test run must not depend on other sites.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * GitHub's anchor for a heading (github-slugger): lower case, punctuation and symbols dropped, each
 * space a hyphen (two spaces around a dropped `—` give `--`).
 * @param {string} text the heading's text, inline Markdown already stripped
 * @returns {string}
 */
export function githubSlug(text) {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/**
 * The heading text GitHub slugs: link and image syntax reduced to its text, code spans and
 * emphasis markers dropped.
 * @param {string} heading
 */
function headingText(heading) {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/(\*\*|__|\*)/g, '')
    .replace(/<[^>]+>/g, '')
    .trim();
}

/**
 * Splits Markdown into the lines outside fenced code blocks, with their 1-based numbers: a `#`
 * inside a ```` ```ts ```` block is a comment, not a heading, and `[a](b)` there is code.
 * @param {string} markdown
 * @returns {[number, string][]}
 */
function proseLines(markdown) {
  /** @type {[number, string][]} */
  const lines = [];
  let fence = '';
  markdown.split('\n').forEach((line, index) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (open?.[1] && (!fence || open[1].startsWith(fence))) {
      fence = fence ? '' : open[1];
      return;
    }
    if (!fence) lines.push([index + 1, line]);
  });
  return lines;
}

/**
 * Every anchor a page offers: each heading's GitHub slug (repeats numbered `-1`, `-2`, as GitHub
 * does) and each `id="…"` or `name="…"` in its HTML.
 * @param {string} markdown
 * @returns {Set<string>}
 */
export function anchorsOf(markdown) {
  /** @type {Set<string>} */
  const anchors = new Set();
  /** @type {Map<string, number>} */
  const seen = new Map();
  for (const [, line] of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading?.[1] !== undefined) {
      const slug = githubSlug(headingText(heading[1]));
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      anchors.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const match of line.matchAll(/\b(?:id|name)="([^"]+)"/g)) if (match[1]) anchors.add(match[1]);
  }
  return anchors;
}

/**
 * The relative links of a page, as `{ line, target }`: inline links and images `[t](target)`,
 * reference definitions `[t]: target`, and `href`/`src` attributes. External links and bare
 * `#fragment`s with a scheme are left out; `#fragment` alone is a link into the page itself.
 * @param {string} markdown
 * @returns {{ line: number, target: string }[]}
 */
export function linksOf(markdown) {
  /** @type {{ line: number, target: string }[]} */
  const links = [];
  for (const [line, text] of proseLines(markdown)) {
    const code = text.replace(/`[^`]*`/g, '');
    const targets = [
      ...[...code.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1]),
      ...[...code.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)].map((match) => match[1]),
      ...[...code.matchAll(/\b(?:href|src)="([^"]+)"/g)].map((match) => match[1]),
    ];
    for (const target of targets) if (target && !/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push({ line, target });
  }
  return links;
}

/**
 * The broken relative links among the given pages, each as `file:line: message`.
 * @param {string} root the repository root links outside it are refused against
 * @param {string[]} files Markdown files, relative to root
 * @returns {string[]}
 */
export function brokenLinks(root, files) {
  /** @type {Map<string, Set<string>>} */
  const anchorCache = new Map();
  /** @param {string} file */
  const anchorsIn = (file) => {
    let anchors = anchorCache.get(file);
    if (!anchors) anchorCache.set(file, (anchors = anchorsOf(readFileSync(file, 'utf8'))));
    return anchors;
  };
  /** @type {string[]} */
  const problems = [];
  for (const file of files) {
    const page = resolve(root, file);
    for (const { line, target } of linksOf(readFileSync(page, 'utf8'))) {
      const hash = target.indexOf('#');
      const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const fragment = hash === -1 ? '' : decodeURIComponent(target.slice(hash + 1));
      const destination = path === '' ? page : resolve(dirname(page), path);
      const where = `${file}:${line}: ${target}`;
      if (relative(root, destination).startsWith('..')) problems.push(`${where} points outside the repository; link to a file in it or use a full URL.`);
      else if (!existsSync(destination)) problems.push(`${where}: no file ${relative(root, destination)}; fix the path or add the file.`);
      else if (fragment && destination.endsWith('.md') && !anchorsIn(destination).has(fragment)) {
        problems.push(`${where}: ${relative(root, destination)} has no heading or anchor "${fragment}" (GitHub's slug of a heading: lower case, punctuation dropped, spaces as hyphens).`);
      }
    }
  }
  return problems;
}

/**
 * The Markdown pages this repository publishes: its top-level *.md files and docs/**\/*.md
 * (build output and dependencies are not pages).
 * @param {string} root
 * @returns {string[]}
 */
export function markdownPages(root) {
  /** @type {string[]} */
  const pages = readdirSync(root).filter((name) => name.endsWith('.md') && statSync(join(root, name)).isFile());
  /** @param {string} dir */
  const walk = (dir) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory() && !entry.name.startsWith('.')) walk(path);
      else if (entry.isFile() && entry.name.endsWith('.md')) pages.push(path);
    }
  };
  if (existsSync(join(root, 'docs'))) walk('docs');
  return pages.sort();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = process.cwd();
  const pages = markdownPages(root);
  const problems = brokenLinks(root, pages);
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} broken link(s) in the Markdown pages.`);
    process.exit(1);
  }
  console.log(`Links checked in ${pages.length} Markdown page(s): none broken.`);
}
