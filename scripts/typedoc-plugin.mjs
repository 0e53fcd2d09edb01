// @ts-check
/**
 * Tabula's TypeDoc plugin (loaded by typedoc.config.js). It does two things TypeDoc's options
 * cannot:
 *
 * - names each entry module by the specifier users import it with (`tabula-sdk`, `tabula-sdk/sync`,
 *   `tabula-sdk/token-worker/o200k_base`), read from package.json `exports`, instead of its source
 *   path (`sync`, `tokens/o200k-worker`), so the names cannot drift from the manifest, and gives it
 *   the paragraph its file opens with (TypeDoc takes a file's first comment for the module only
 *   with a `@module` tag, which the house style has no use for);
 * - checks that every public API item has a doc comment. TypeDoc's own `validation.notDocumented`
 *   also asks for a comment on every member of every anonymous object type, which for a zod schema
 *   constant means each field of the inferred shape, and for a union of object literals each variant's
 *   fields: those are documented by the comment of the schema or type they belong to. This check asks
 *   for what API Extractor calls API items: every exported function, class, interface, type, variable
 *   and enum, and every member of an exported class or interface. Each gap is a TypeDoc warning naming
 *   the symbol and its file, which `treatWarningsAsErrors` makes fatal.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { Application, Comment, Converter, DeclarationReflection, MinimalSourceFile, ReflectionKind } from 'typedoc';

/** @typedef {{ name: string, exports: Record<string, unknown> }} Manifest */

/**
 * This repository's package.json (the working directory's, as TypeDoc runs from the root).
 * @returns {Manifest}
 */
export function readManifest() {
  const parsed = /** @type {unknown} */ (JSON.parse(readFileSync('package.json', 'utf8')));
  return /** @type {Manifest} */ (parsed);
}

/**
 * Source file (relative to the repository, `src/sync/index.ts`) → import specifier.
 * @param {Manifest} manifest
 * @returns {Map<string, string>}
 */
export function specifiersBySource(manifest) {
  /** @type {Map<string, string>} */
  const names = new Map();
  for (const [specifier, target] of Object.entries(manifest.exports)) {
    const js = typeof target === 'string' ? target : /** @type {{ default?: string }} */ (target).default;
    if (!js?.startsWith('./dist/')) continue;
    const source = js.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts');
    names.set(source, specifier === '.' ? manifest.name : `${manifest.name}/${specifier.slice(2)}`);
  }
  return names;
}

/**
 * The text of the JSDoc comment a file opens with, without its `/**`, `*\/` and leading `*`s; ''
 * when the file opens with none.
 * @param {string} source
 */
export function openingComment(source) {
  const match = /^\s*\/\*\*([\s\S]*?)\*\//.exec(source);
  return match?.[1] === undefined ? '' : match[1].split('\n').map((line) => line.replace(/^\s*\* ?/, '')).join('\n').trim();
}

/** Kinds that must carry a doc comment wherever they appear outside an anonymous object type. */
const DOCUMENTED =
  ReflectionKind.Class |
  ReflectionKind.Interface |
  ReflectionKind.TypeAlias |
  ReflectionKind.Function |
  ReflectionKind.Variable |
  ReflectionKind.Enum |
  ReflectionKind.EnumMember |
  ReflectionKind.Property |
  ReflectionKind.Method |
  ReflectionKind.Accessor;

/**
 * Whether a reflection says anything: its own comment, or one on a signature (a function's or a
 * method's comment sits on its signature; an accessor's on its getter or setter; a property of
 * function type may carry it on the call signature).
 * @param {DeclarationReflection} reflection
 */
function documented(reflection) {
  if (reflection.hasComment()) return true;
  const signatures = [...(reflection.signatures ?? []), reflection.getSignature, reflection.setSignature];
  if (reflection.type?.type === 'reflection') signatures.push(...(reflection.type.declaration.signatures ?? []));
  return signatures.some((signature) => signature?.hasComment());
}

/** @param {import('typedoc').Reflection} reflection */
function insideTypeLiteral(reflection) {
  for (let r = reflection.parent; r; r = r.parent) if (r.kindOf(ReflectionKind.TypeLiteral)) return true;
  return false;
}

/**
 * The public API items without a doc comment, as `[friendly name, kind, source file]`, in source
 * order. Items declared outside this package (inherited from `Error`, from zod) are not ours to
 * document.
 * @param {import('typedoc').ProjectReflection} project
 * @returns {[string, string, string][]}
 */
export function undocumented(project) {
  /** @type {[string, string, string][]} */
  const gaps = [];
  for (const reflection of project.getReflectionsByKind(DOCUMENTED)) {
    if (!(reflection instanceof DeclarationReflection) || insideTypeLiteral(reflection)) continue;
    const symbol = project.getSymbolIdFromReflection(reflection);
    if (!symbol || symbol.packageName !== project.packageName || !symbol.packagePath.startsWith('src/')) continue;
    if (!documented(reflection)) gaps.push([reflection.getFriendlyFullName(), ReflectionKind[reflection.kind], symbol.packagePath]);
  }
  return gaps;
}

/** @param {Application} app */
export function load(app) {
  const names = specifiersBySource(readManifest());
  app.converter.on(Converter.EVENT_CREATE_DECLARATION, (context, reflection) => {
    if (!reflection.kindOf(ReflectionKind.Module)) return;
    const source = context.getSymbolFromReflection(reflection)?.declarations?.[0]?.getSourceFile();
    const name = source && names.get(relative(process.cwd(), source.fileName).replaceAll('\\', '/'));
    if (!source || !name) return;
    reflection.name = name;
    const text = openingComment(source.text);
    if (!reflection.comment && text) {
      reflection.comment = new Comment(app.converter.parseRawComment(new MinimalSourceFile(text, /** @type {import('typedoc').NormalizedPath} */ (source.fileName)), context.project.files).content);
    }
  });
  app.on(Application.EVENT_VALIDATE_PROJECT, (project) => {
    for (const [name, kind, file] of undocumented(project)) {
      app.logger.validationWarning(`${name} (${kind}) in ${file} has no doc comment: every public API item states its contract in TSDoc (STYLE.md).`);
    }
  });
}
