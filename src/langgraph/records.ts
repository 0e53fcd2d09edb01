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
 *
 * The integration uses only the public entry points (ESLint enforces it), so
 * the key hash and the check of a record read back are written out here.
 */
import * as z from 'zod/mini';
import { en } from 'zod/locales';
import { TabulaError } from '../index.js';

/**
 * A 64-bit FNV-style hash of `text` (its UTF-16 code units) as 16 lowercase hex digits, for key parts.
 * Stored keys depend on it, so it must never change: a test holds it to the values it has always given.
 */
export function shortHash(text: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) >>> 0;
    h2 = (h2 ^ (h1 >>> 13)) >>> 0;
  }
  return h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0');
}

// zod/mini has no messages of its own; passed per parse (never z.config()), so the app's zod keeps its own.
const englishMessages: z.core.ParseContext<z.core.$ZodIssue> = { error: /* @__PURE__ */ en().localeError };

/** `a.b[0].c` from an issue's path. */
function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  return out === '' ? '(root)' : out;
}

/**
 * A record read back from memory, checked against its schema; a record that does not match throws
 * `schema/invalid` naming the key, the scope and each bad field, with zod's issues untouched.
 */
export function parseRecord<T>(schema: z.ZodMiniType<T>, value: unknown, key: string, scope: string): T {
  // eslint-disable-next-line no-restricted-syntax -- the integration's one parse, with English messages (see englishMessages)
  const result = z.safeParse(schema, value, englishMessages);
  if (!result.success) {
    const issues = result.error.issues;
    throw new TabulaError(
      'schema/invalid',
      `LangGraph record "${key}" in memory scope "${scope}" is corrupt or was written by incompatible code: ` +
        `${issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`).join('; ')}. Delete the thread with deleteThread() to repair it.`,
      { issues },
    );
  }
  return result.data;
}

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
