// @ts-check
/**
 * The docs site: the API reference TypeDoc generates from the TSDoc comments, with the README as its
 * front page and CONTRIBUTING.md and every page under docs/ (the guide in docs/guide/) beside it. `npm run docs`
 * builds it into site/, after scripts/check-doc-links.mjs has checked the Markdown's links as GitHub
 * renders them.
 *
 * The entry points are read from package.json `exports`, so a new public entry is documented the day
 * it is exported; scripts/typedoc-plugin.mjs names each module by its import specifier
 * (`tabula-sdk/sync`) and checks the doc comments. Every warning fails the build: a public symbol
 * without a doc comment, an `{@link}` to nothing, a relative link in a page to a missing file or
 * heading, a public signature that uses a type no entry exports.
 */
import { existsSync, readdirSync } from 'node:fs';
import { readManifest, specifiersBySource } from './scripts/typedoc-plugin.mjs';

const manifest = readManifest();

/**
 * The source file behind each public entry point (`./dist/sync/index.js` ← `src/sync/index.ts`), the
 * root's last. An
 * export other than `./package.json` that maps to no source file stops the build: the reference
 * would silently leave that entry out.
 * @returns {string[]}
 */
function entryPoints() {
  // The root entry re-exports the core and more; TypeDoc documents a symbol under the first entry
  // that exports it, so the root goes last and each subpath's page holds its own symbols.
  const sources = [...specifiersBySource(manifest).keys()].sort((a, b) => Number(a === 'src/index.ts') - Number(b === 'src/index.ts'));
  const missing = Object.keys(manifest.exports).filter((specifier) => specifier !== './package.json').length - sources.length;
  const absent = sources.filter((source) => !existsSync(source));
  if (missing > 0 || absent.length > 0) {
    throw new Error(`typedoc.config.js: every package.json export must map ./dist/X.js to src/X.ts (${missing} export(s) do not; missing sources: ${absent.join(', ') || 'none'}).`);
  }
  return sources;
}

/**
 * The Markdown pages under `dir`, sorted by path. Every page under docs/ is a page of the site (the
 * guide, the architecture, the contributors' records): a link to one from another page then opens it
 * rendered, where TypeDoc would otherwise copy the raw .md file.
 * @param {string} dir
 * @returns {string[]}
 */
function markdownUnder(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.md'))
    .map((file) => `${dir}/${file.replaceAll('\\', '/')}`)
    .sort();
}

/** The pages beside the reference; they are written apart from this config, so only those that exist. */
const projectDocuments = ['CONTRIBUTING.md', ...markdownUnder('docs')].filter((file) => existsSync(file));

/** @type {Partial<import('typedoc').TypeDocOptions>} */
const config = {
  name: manifest.name,
  entryPoints: entryPoints(),
  entryPointStrategy: 'resolve',
  tsconfig: 'tsconfig.build.json',
  plugin: ['./scripts/typedoc-plugin.mjs'],
  readme: 'README.md',
  projectDocuments,
  out: 'site',
  cleanOutputDir: true,
  // The reference is of the public API: what the entries export, not their internals.
  excludePrivate: true,
  excludeInternal: true,
  excludeExternals: true,
  includeVersion: true,
  // No source links: the repository's host is not known here (a clone's remote may be a local path), and a
  // link to nowhere would be a warning, hence an error.
  disableSources: true,
  sort: ['source-order'],
  // notDocumented is off because the plugin's check replaces it (it would also ask for a comment on
  // each field of every zod schema's inferred shape).
  validation: { notExported: true, invalidLink: true, invalidPath: true, rewrittenLink: true, notDocumented: false, unusedMergeModuleWith: true },
  treatWarningsAsErrors: true,
  // Bodies is the op-schema table behind OpKind and OpBody; OpKind's comment lists the kinds.
  intentionallyNotExported: ['Bodies'],
};

export default config;
