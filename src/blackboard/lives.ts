/**
 * What the blackboard shares with code that must not load Yjs: the names
 * of a board's database and of the channel that announces ended lives,
 * the shape of that announcement, the database delete, a read of a board's
 * stored updates, and the origin the sync client tags server changes with.
 * The lazy registry (lazy.ts) uses these to delete a session's board, and
 * to find that a board holds nothing, without loading Yjs.
 *
 * Every name the blackboard keeps things under is built here (the
 * databases, the lives channel, each board's tab channel), and nowhere
 * else: tabs of an older version talk to newer ones over these channels
 * and open the same databases, so the names stay byte for byte what earlier
 * versions used (test/unit/blackboard/names.test.ts pins them).
 */

/** The transaction origin the sync client uses for changes from the server. */
export const REMOTE_ORIGIN: unique symbol = Symbol('tabula.remote');

/**
 * The database of one life of a session's board:
 * `${name}:${userId}:${sessionId}:blackboard`, each part URI-encoded so ids
 * with ':' cannot collide, and `:${life}` before the suffix for every life
 * but the first one a database ever had ('' ).
 */
export function blackboardDatabaseName(name: string, userId: string, sessionId: string, life = ''): string {
  const parts = life === '' ? [name, userId, sessionId] : [name, userId, sessionId, life];
  return parts.map(encodeURIComponent).join(':') + ':blackboard';
}

/**
 * The lives of a session's board that have a database in this browser
 * (`indexedDB.databases()`; none where a browser lacks it). A delete that
 * arrived from another device names no life of this replica, so the
 * databases themselves say which lives are left to remove.
 */
export async function boardLivesOnDisk(name: string, userId: string, sessionId: string): Promise<string[]> {
  if (typeof indexedDB === 'undefined' || typeof indexedDB.databases !== 'function') return [];
  const first = blackboardDatabaseName(name, userId, sessionId);
  const prefix = first.slice(0, -'blackboard'.length);
  const lives: string[] = [];
  for (const { name: database } of await indexedDB.databases()) {
    if (database === first) lives.push('');
    else if (database?.startsWith(prefix) && database.endsWith(':blackboard')) {
      const life = database.slice(prefix.length, -':blackboard'.length);
      if (life !== '' && !life.includes(':')) lives.push(decodeURIComponent(life));
    }
  }
  return lives.sort();
}

/** The BroadcastChannel on which a Tabula database's tabs announce the end of a board's life. */
export function livesChannelName(name: string): string {
  return `tabula:${name}:blackboard-lives`;
}

/** The BroadcastChannel on which the tabs of a Tabula database keep one life of a session's board in step (y-protocols frames). */
export function boardChannelName(name: string, userId: string, sessionId: string, life: string): string {
  return `tabula:${name}:blackboard:${JSON.stringify([userId, sessionId, life])}`;
}

/** A delete announced to the other tabs; validated on receipt like every cross-tab message. */
export interface LifeEnded {
  v: 1;
  userId: string;
  sessionId: string;
  life: string;
}

export function isLifeEnded(raw: unknown): raw is LifeEnded {
  if (typeof raw !== 'object' || raw === null) return false;
  const m = raw as Record<string, unknown>;
  return m.v === 1 && typeof m.userId === 'string' && typeof m.sessionId === 'string' && typeof m.life === 'string';
}

/** Deletes a board's database; other tabs' connections close on versionchange, then the delete proceeds. */
export function deleteDocDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`Could not delete ${name}`));
    // Other tabs' connections close on versionchange (lib0 does that), after which the delete proceeds.
    request.onblocked = () => undefined;
  });
}

/**
 * The updates stored in a board database (y-indexeddb's `updates` store), read without y-indexeddb or
 * Yjs; none when the database does not exist, which this read does not create (its creation is aborted).
 * The connection closes as soon as the read is done, or when another connection deletes the database.
 */
export function readBoardUpdates(database: string): Promise<Uint8Array[]> {
  if (typeof indexedDB === 'undefined') return Promise.resolve([]);
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(database);
    let absent = false;
    request.onupgradeneeded = () => {
      // A database that did not exist: nothing stored. Aborting the upgrade leaves no database behind
      // (a stray empty one would count as a board to scan, and to delete, for ever).
      absent = true;
      request.transaction?.abort();
    };
    request.onerror = (event) => {
      event.preventDefault();
      if (absent) resolve([]);
      else reject(request.error ?? new Error(`Could not open ${database}`));
    };
    request.onsuccess = () => {
      const db = request.result;
      db.onversionchange = () => db.close();
      if (!db.objectStoreNames.contains('updates')) {
        db.close();
        resolve([]);
        return;
      }
      const tx = db.transaction('updates', 'readonly');
      const rows = tx.objectStore('updates').getAll();
      tx.oncomplete = () => {
        db.close();
        resolve(rows.result as Uint8Array[]);
      };
      tx.onabort = () => {
        db.close();
        reject(tx.error ?? new Error(`Could not read ${database}`));
      };
    };
  });
}

/** The base64 of the state vector of an empty Yjs doc (`Y.encodeStateVector(new Y.Doc())`): a board with nothing in it. */
export const EMPTY_BOARD_SEEN = 'AA==';
