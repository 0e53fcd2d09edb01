/**
 * `FrozenContext`: an immutable snapshot of a working context, safe to share
 * across agents, tabs and workers, with structural equality and a stable
 * key for memo caches. `context.freeze()` makes one, `WorkingContext.fromFrozen`
 * thaws one, and frozen-data.ts carries one as plain data; this module owns
 * the snapshot itself.
 */
import { describeValue } from './args.js';
import { TabulaError } from './errors.js';
import { deepFreeze, stableKey, type JsonValue } from './json.js';
import type { Message } from './message.js';
import type { PrefixContext } from './prefix.js';

/** An immutable snapshot of a context, safe to share across agents, tabs and workers. */
export interface FrozenContext {
  /** The prompt head at the time of the snapshot. */
  readonly prefix: PrefixContext;
  /** The messages at the time of the snapshot, in order, frozen. */
  readonly messages: readonly Message[];
  /** Sorted by key, values deep-frozen. */
  readonly scratchpad: readonly (readonly [string, JsonValue])[];
  /** The journal's entries, frozen as a list; the entries themselves are shared. */
  readonly journalEntries: readonly unknown[];
  /** Structural equality. */
  equals(other: FrozenContext): boolean;
  /** A stable structural key, for memo caches; equal keys mean equal snapshots. */
  key(): string;
}

/** Builds a FrozenContext from its parts (validated messages, JSON values). Keys are sorted here. */
export function freezeContext(
  prefix: PrefixContext,
  messages: readonly Message[],
  scratchpad: readonly (readonly [string, JsonValue])[],
  journalEntries: readonly unknown[],
): FrozenContext {
  // Keys are unique (a Map's, or checked by fromFrozenData), so sorting the keys orders the entries.
  const values = new Map(scratchpad);
  let key: string | undefined;
  const snapshot: FrozenContext = {
    prefix,
    messages: Object.freeze([...messages]),
    scratchpad: Object.freeze([...values.keys()].sort().map((k) => Object.freeze([k, deepFreeze(values.get(k) as JsonValue)] as const))),
    journalEntries: Object.freeze([...journalEntries]),
    key() {
      key ??= stableKey([prefix.key(), snapshot.messages, snapshot.scratchpad, snapshot.journalEntries]);
      return key;
    },
    equals(other) {
      if (typeof (other as Partial<FrozenContext> | null)?.key !== 'function') {
        throw new TabulaError('argument/invalid', `frozen.equals(other) compares with a FrozenContext (from context.freeze()), got ${describeValue(other)}.`);
      }
      return other === snapshot || other.key() === snapshot.key();
    },
  };
  return Object.freeze(snapshot);
}
