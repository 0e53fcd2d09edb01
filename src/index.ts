/**
 * `tabula-sdk`: the browser entry. It re-exports the pure core
 * (`tabula-sdk/core`) and adds the IndexedDB store, the blackboard and the
 * worker token counter. Importing it opens nothing: every resource is
 * opened by a factory.
 *
 * A curated entry: it exports what the README documents (with the types its
 * signatures name) and nothing else; test/unit/exports.test.ts pins the list.
 * Each folder's index file is its curated part of the list.
 */
// `export *`, not `export { … } from`: with code splitting, esbuild (0.28) puts a module this file
// names in a re-export into the start chunk of an app that imports only openTabula, once this file is
// in the graph at all; a named list here put Comlink, Yjs and lib0 in that chunk (npm run check:size).
export * from './core/index.js';
export * from './store/index.js';
export * from './blackboard/index.js';
export * from './tokens/index.js';
