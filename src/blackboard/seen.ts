/**
 * What a replica has of a board life, and what another replica's board of
 * that life holds beyond it: the blackboard half of a delete's report of
 * the work it drops (`DroppedWork` in store/apply/lives.ts). The deleting
 * replica says what it had as the Yjs state vector of its board (bounded,
 * {@link boardSeenOf}); a replica applying the delete names the keys whose
 * value it holds was written by an item beyond it ({@link unseenBoardKeys}).
 *
 * Keys only: a key whose last write here was a deletion is not named (as a
 * memory key deleted is not), nor is content of other root types of the doc
 * (a Y.Text used through `doc`). Loaded with Yjs (registry.ts); lazy.ts
 * answers for a board with nothing stored without loading it.
 */
import * as Y from 'yjs';
import { BOARD_SEEN_MAX } from '../core/ops.js';
import { BLACKBOARD_MAP } from './validate.js';

// Not lib0/buffer: it would bring lib0's environment sniffing into openTabula's bundle (about 2 KB) for two lines.
const toBase64 = (bytes: Uint8Array): string => {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
};
const fromBase64 = (base64: string): Uint8Array => Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));

/** A doc holding `updates` (a board life's stored log), for reading only. */
export function docOfUpdates(updates: readonly Uint8Array[]): Y.Doc {
  const doc = new Y.Doc();
  Y.transact(doc, () => updates.forEach((update) => Y.applyUpdate(doc, update)));
  return doc;
}

/** Bytes of an unsigned varint (lib0 encoding: 7 bits a byte). */
function varintBytes(value: number): number {
  let bytes = 1;
  for (let rest = Math.floor(value / 128); rest > 0; rest = Math.floor(rest / 128)) bytes++;
  return bytes;
}

/**
 * The base64 state vector of `doc`, at most BOARD_SEEN_MAX characters: past that, the clients that wrote
 * most are kept. A client left out counts as unseen wherever the vector is compared, so the keys its
 * items hold are named as dropped even where the deleter had them: more is said, never less.
 */
export function boardSeenOf(doc: Y.Doc): string {
  const full = toBase64(Y.encodeStateVector(doc));
  if (full.length <= BOARD_SEEN_MAX) return full;
  const entries = [...Y.decodeStateVector(Y.encodeStateVector(doc))].sort((a, b) => b[1] - a[1]);
  const maxBytes = Math.floor(BOARD_SEEN_MAX / 4) * 3;
  // The count's varint takes at most 3 bytes for any count that fits in the limit.
  let bytes = 3;
  const kept = new Map<number, number>();
  for (const [client, clock] of entries) {
    bytes += varintBytes(client) + varintBytes(clock);
    if (bytes > maxBytes) break;
    kept.set(client, clock);
  }
  return toBase64(Y.encodeStateVector(kept));
}

/**
 * The keys of `doc`'s board whose value (not a deletion) was written by an item beyond `seen` (a base64
 * state vector as {@link boardSeenOf} makes), sorted. A vector that does not decode counts as empty: every
 * key is named.
 */
export function unseenBoardKeys(doc: Y.Doc, seen: string): string[] {
  let vector: Map<number, number>;
  try {
    vector = Y.decodeStateVector(fromBase64(seen));
  } catch {
    vector = new Map();
  }
  const keys: string[] = [];
  for (const [key, item] of doc.getMap(BLACKBOARD_MAP)._map) {
    if (!item.deleted && item.id.clock + item.length > (vector.get(item.id.client) ?? 0)) keys.push(key);
  }
  return keys.sort();
}
