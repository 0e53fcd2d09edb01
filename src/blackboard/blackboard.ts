/**
 * The Blackboard API over one Y.Doc: a map of JSON values that several
 * agents, tabs and people write at once, merged by Yjs (last writer per key
 * wins, the same way on every replica).
 *
 * This module is the typed surface only. Loading from IndexedDB, syncing
 * with other tabs and flushing are given to it by whoever built the doc
 * (see registry.ts), so it runs in Node over a bare Y.Doc as well.
 */
import type * as Y from 'yjs';
import { cloneJson, type JsonValue } from '../core/json.js';
import { checkEntries, checkFunction, checkKey, checkValue } from './checks.js';
import { BLACKBOARD_MAP } from './validate.js';

/** Where a change came from: this tab, another tab, or the sync server. */
export type ChangeSource = 'local' | 'tab' | 'remote';

/** One changed key; `value` is undefined when the key was deleted. */
export interface BlackboardChange {
  /** The key that changed. */
  readonly key: string;
  /** Its new value (a copy), or undefined when it was deleted. */
  readonly value: JsonValue | undefined;
  /** Where the change came from. */
  readonly origin: ChangeSource;
}

/** A shared JSON scratchpad, live in every tab. */
export interface Blackboard {
  /** A copy of the value under `key`. */
  get(key: string): JsonValue | undefined;
  /** Sets one key; throws `schema/invalid` (and changes nothing) for a value that is not JSON. */
  set(key: string, value: JsonValue): void;
  /** Removes one key (nothing happens when it is absent); observers see it with value undefined. */
  delete(key: string): void;
  /** Whether `key` holds a value. */
  has(key: string): boolean;
  /** The keys, sorted. */
  keys(): string[];
  /** A deep copy of the whole board. */
  toJSON(): Record<string, JsonValue>;
  /** Sets several keys in one Yjs transaction; if any value is not JSON, none is set. */
  update(values: Record<string, JsonValue>): void;
  /** Groups changes into one transaction: observers and other tabs see them together. */
  transact(fn: () => void): void;
  /** Calls `listener` after each transaction that changed keys; returns the unsubscribe function (calling it again does nothing). */
  observe(listener: (changes: BlackboardChange[]) => void): () => void;
  /** Resolves once the board's stored content is loaded from IndexedDB (at once if it closes, or its session is deleted, first). */
  readonly whenLoaded: Promise<void>;
  /** Resolves once every local change made so far is durable in IndexedDB. */
  flushed(): Promise<void>;
  /** The Y.Doc itself, for Y.Text editors, awareness and the like. */
  readonly doc: Y.Doc;
}

/** What {@link createBlackboard} builds a board from; the store's registry fills it in. */
export interface BlackboardInit {
  /** The Y.Doc whose map holds the board. */
  doc: Y.Doc;
  /** Maps a Yjs transaction origin to where the change came from. @default everything is 'local' */
  sourceOf?: (origin: unknown) => ChangeSource;
  /** @default already loaded */
  whenLoaded?: Promise<void>;
  /** @default resolves at once (nothing to persist) */
  flushed?: () => Promise<void>;
  /** Throws when the board may no longer be used (its session was closed or deleted). */
  assertOpen?: () => void;
  /** Aborted when this view of the board closes: its observers are removed. */
  signal?: AbortSignal;
  /**
   * Receives what an observe() listener threw. A listener's error never
   * reaches the writer (the change is applied by then) nor another tab.
   * @default console.error
   */
  onListenerError?: (error: unknown) => void;
}

/** Builds the Blackboard API over `init.doc`. */
export function createBlackboard(init: BlackboardInit): Blackboard {
  const { doc } = init;
  const map = doc.getMap<JsonValue>(BLACKBOARD_MAP);
  const sourceOf = init.sourceOf ?? (() => 'local' as const);
  const assertOpen = init.assertOpen ?? (() => undefined);
  // Our own writes carry this origin, so observers can tell them from other tabs' and sync's.
  const local = { source: 'local' as const };
  const classify = (origin: unknown): ChangeSource => (origin === local ? 'local' : sourceOf(origin));

  const onListenerError = init.onListenerError ?? ((error: unknown) => console.error('[tabula] a blackboard observe() listener threw', error));

  return {
    doc,
    whenLoaded: init.whenLoaded ?? Promise.resolve(),
    flushed: init.flushed ?? (() => Promise.resolve()),
    get(key) {
      const value = map.get(checkKey(key));
      return value === undefined ? undefined : cloneJson(value);
    },
    set(key, value) {
      assertOpen();
      const copy = checkValue(checkKey(key), value);
      doc.transact(() => map.set(key, copy), local);
    },
    delete(key) {
      assertOpen();
      checkKey(key);
      doc.transact(() => map.delete(key), local);
    },
    has(key) {
      return map.has(checkKey(key));
    },
    keys() {
      return [...map.keys()].sort();
    },
    toJSON() {
      const out: Record<string, JsonValue> = {};
      for (const key of [...map.keys()].sort()) out[key] = cloneJson(map.get(key) as JsonValue);
      return out;
    },
    update(values) {
      assertOpen();
      const entries = checkEntries(values);
      doc.transact(() => {
        for (const [key, value] of entries) map.set(key, value);
      }, local);
    },
    transact(fn) {
      assertOpen();
      doc.transact(checkFunction(fn, 'transact'), local);
    },
    observe(listener) {
      assertOpen();
      checkFunction(listener, 'observe');
      const handler = (event: Y.YMapEvent<JsonValue>) => {
        if (init.signal?.aborted) return;
        const origin = classify(event.transaction.origin);
        const changes = ([...event.keysChanged] as string[]).sort().map((key) => {
          const value = map.get(key);
          return Object.freeze({ key, value: value === undefined ? undefined : cloneJson(value), origin });
        });
        // Yjs calls observers inside the writer's transaction: a throw here would escape from set()
        // (or from another tab's applyUpdate) after the change was applied.
        try {
          listener(changes);
        } catch (error) {
          onListenerError(error);
        }
      };
      map.observe(handler);
      // Idempotent: a view's close stops every listener, and an unsubscribe may come after it (a React
      // effect's cleanup); Yjs logs an error for a handler removed twice.
      let stopped = false;
      const stop = () => {
        if (stopped) return;
        stopped = true;
        map.unobserve(handler);
        init.signal?.removeEventListener('abort', stop);
      };
      init.signal?.addEventListener('abort', stop, { once: true });
      return stop;
    },
  };
}
