/**
 * `tabula-sdk`: the browser entry. It re-exports the pure core; the IndexedDB
 * store, the blackboard and the worker token counter are added here as they
 * land. Importing it opens nothing: every resource is opened by a factory.
 */
export * from './core/index.js';
export * from './store/index.js';
export * from './blackboard/index.js';
export * from './tokens/index.js';
