/**
 * A FrozenContext as plain data, for crossing a worker, a tab or a file:
 * structured clone copies data, not classes or methods, so a snapshot is
 * sent as data and rebuilt (and validated) on the other side.
 */
import { freezeContext, type FrozenContext } from './frozen.js';
import { TabulaError } from './errors.js';
import { assertJsonValue, assertSafeKey, type JsonValue } from './json.js';
import { parseMessages, type Message } from './message.js';
import { PrefixContext } from './prefix.js';

/** The data of a FrozenContext: what postMessage and JSON can carry. */
export interface FrozenContextData {
  /** The prefix's parts, as in {@link PrefixContext}. */
  prefix: { systemPrompt: string; grounding: Message[]; schemaBlock: string | null };
  /** The messages, in order. */
  messages: Message[];
  /** The scratchpad's entries as `[key, value]`, sorted by key. */
  scratchpad: [string, JsonValue][];
  /** Passed through as they are; they must be cloneable for postMessage (JSON for a file). */
  journalEntries: unknown[];
}

/** The snapshot as plain data. */
export function toFrozenData(frozen: FrozenContext): FrozenContextData {
  return {
    prefix: { systemPrompt: frozen.prefix.systemPrompt, grounding: [...frozen.prefix.grounding], schemaBlock: frozen.prefix.schemaBlock },
    messages: [...frozen.messages],
    scratchpad: frozen.scratchpad.map(([key, value]) => [key, value]),
    journalEntries: [...frozen.journalEntries],
  };
}

/** Rebuilds a FrozenContext from data received from elsewhere; throws `schema/invalid` naming the bad part. */
export function fromFrozenData(data: unknown): FrozenContext {
  if (typeof data !== 'object' || data === null) {
    throw new TabulaError('schema/invalid', 'Frozen context data must be an object with prefix, messages, scratchpad and journalEntries.');
  }
  const { prefix, messages, scratchpad, journalEntries } = data as Partial<FrozenContextData>;
  if (typeof prefix !== 'object' || prefix === null || !Array.isArray(messages) || !Array.isArray(scratchpad) || !Array.isArray(journalEntries)) {
    throw new TabulaError('schema/invalid', 'Frozen context data needs prefix (object), messages, scratchpad and journalEntries (arrays).');
  }
  const seen = new Set<string>();
  const entries = scratchpad.map((pair, index): [string, JsonValue] => {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string') {
      throw new TabulaError('schema/invalid', `Frozen context scratchpad[${index}] must be a [key, value] pair.`);
    }
    // A live context keeps one value per key; a repeated key would make two snapshots that rebuild the same context unequal.
    if (seen.has(pair[0])) {
      throw new TabulaError('schema/invalid', `Frozen context scratchpad[${index}] repeats the key ${JSON.stringify(pair[0])}; a snapshot holds one value per key.`);
    }
    seen.add(pair[0]);
    return [assertSafeKey(pair[0], `frozen context scratchpad[${index}]`), assertJsonValue(pair[1], `frozen context scratchpad key ${JSON.stringify(pair[0])}`)];
  });
  return freezeContext(new PrefixContext(prefix), parseMessages(messages, 'frozen context messages'), entries, journalEntries);
}
