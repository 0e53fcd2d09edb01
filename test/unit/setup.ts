// Node has no IndexedDB: fake-indexeddb provides one. It must be installed
// before Dexie is first imported, because Dexie looks up indexedDB then.
import 'fake-indexeddb/auto';
