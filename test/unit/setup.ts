// Node has no IndexedDB: fake-indexeddb provides one. It must be installed
// before Dexie is first imported, because Dexie looks up indexedDB then.
import 'fake-indexeddb/auto';
// A test that writes to console.error/warn/trace without saying so fails (see the module).
import '../console-guard.js';
