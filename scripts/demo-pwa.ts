/**
 * The demo's offline support, as a Vite plugin (build only): emits `sw.js`
 * from scripts/demo-sw.js with the list of every file of the build to
 * precache and a version that changes whenever any of them does, so a new
 * build replaces the old cache. The dev server has no service worker (it
 * would fight Vite's module reloading).
 *
 * Why not vite-plugin-pwa: it brings workbox-build, and with it Babel,
 * Rollup and terser, to generate what is here some fifty lines.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Plugin } from 'vite';

function filesUnder(dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => (entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)]));
}

/** The plugin; `publicDir` is the folder Vite copies as is (its files are precached too). */
export function demoPwa(): Plugin {
  let publicDir = '';
  return {
    name: 'tabula-demo-pwa',
    apply: 'build',
    configResolved(config) {
      publicDir = config.publicDir;
    },
    generateBundle(_options, bundle) {
      const built = Object.keys(bundle).filter((name) => !name.endsWith('.map'));
      const copied = filesUnder(publicDir).map((file) => relative(publicDir, file).split('\\').join('/'));
      // './' is the app itself: a navigation to it offline needs the page, not a 404.
      const precache = ['./', ...new Set([...built, ...copied])].filter((name) => name !== 'index.html' && name !== 'sw.js').sort();
      const hash = createHash('sha256');
      for (const name of built) {
        const item = bundle[name];
        if (item) hash.update(name).update(item.type === 'chunk' ? item.code : typeof item.source === 'string' ? item.source : Buffer.from(item.source));
      }
      for (const name of copied) hash.update(name).update(readFileSync(join(publicDir, name)));
      const source = readFileSync(new URL('./demo-sw.js', import.meta.url), 'utf8')
        .replace('[] /* __PRECACHE__ */', JSON.stringify(precache.map((name) => (name === './' ? name : `./${name}`))))
        .replace("'dev' /* __VERSION__ */", JSON.stringify(hash.digest('hex').slice(0, 16)));
      this.emitFile({ type: 'asset', fileName: 'sw.js', source });
    },
  };
}
