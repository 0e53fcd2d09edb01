/**
 * How the LangGraph checkpointer lays its data out in Tabula memory, and
 * the zod schemas that check it when read back. Pure: no storage here.
 *
 * One memory scope per thread; inside it, per checkpoint namespace:
 * - `c:<ns>:<checkpointId>` the checkpoint (without channel values) and its metadata;
 * - `w:<ns>:<checkpointId>` the pending writes of that checkpoint;
 * - `b:<ns>:<channel+version>` one channel value at one version (stored once, shared by
 *   every checkpoint that has that version, as LangGraph's SQL savers do);
 * - `l:<ns>` the id of the newest checkpoint, so `getTuple` without an id is one read.
 * Long or free-form parts (namespaces, channel names, versions) are hashed to stay under
 * the 128-character key limit; every record also carries its parts in full.
 */
import * as z from 'zod/mini';
import { shortHash } from '../index.js';

/** A serialized value: `serde.dumpsTyped` output, as JSON (text kept as text, bytes as base64). */
export const SerializedSchema = z.union([
  z.strictObject({ t: z.string(), s: z.string() }),
  z.strictObject({ t: z.string(), b64: z.string() }),
]);
export type Serialized = { t: string; s: string } | { t: string; b64: string };

export const CheckpointRecordSchema = z.strictObject({
  threadId: z.string(),
  ns: z.string(),
  id: z.string(),
  parentId: z.nullable(z.string()),
  checkpoint: SerializedSchema,
  metadata: SerializedSchema,
});
export type CheckpointRecord = {
  threadId: string;
  ns: string;
  id: string;
  parentId: string | null;
  checkpoint: Serialized;
  metadata: Serialized;
};

export const WriteRecordSchema = z.strictObject({
  taskId: z.string(),
  channel: z.string(),
  idx: z.number().check(z.int()),
  taskPath: z.string(),
  value: SerializedSchema,
});
export type WriteRecord = { taskId: string; channel: string; idx: number; taskPath: string; value: Serialized };
export const WriteListSchema = z.array(WriteRecordSchema);

export const BlobRecordSchema = z.strictObject({
  channel: z.string(),
  version: z.union([z.string(), z.number()]),
  value: SerializedSchema,
});
export type BlobRecord = { channel: string; version: string | number; value: Serialized };

/** The thread index entry: which thread a scope holds. */
export const ThreadRecordSchema = z.strictObject({ threadId: z.string() });

/** A key part that is safe between `:` separators and short: kept when plain, hashed otherwise. */
function part(text: string, max: number): string {
  return text.length <= max && /^[\w.-]*$/.test(text) ? text : `#${shortHash(text)}`;
}

/** The memory scope of a thread. */
export function threadScope(threadId: string): string {
  return threadId.length <= 100 && !threadId.startsWith('#') ? `t:${threadId}` : `t#${shortHash(threadId)}`;
}

export const keys = {
  checkpointPrefix: (ns: string) => `c:${part(ns, 24)}:`,
  checkpoint: (ns: string, id: string) => `c:${part(ns, 24)}:${part(id, 64)}`,
  writes: (ns: string, id: string) => `w:${part(ns, 24)}:${part(id, 64)}`,
  blob: (ns: string, channel: string, version: string | number) => `b:${part(ns, 24)}:${shortHash(JSON.stringify([channel, version]))}`,
  latest: (ns: string) => `l:${part(ns, 24)}`,
};

/** Bytes → base64 without Buffer (browser and Node). */
export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** base64 → bytes. */
export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
