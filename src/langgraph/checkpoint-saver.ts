/**
 * `TabulaCheckpointSaver`: a LangGraph.js checkpointer that keeps threads in
 * Tabula, so a graph's state survives reloads, is shared by every tab and
 * syncs with the rest of the session data. It stores through the public
 * session memory API (every write is an op), in one Tabula session
 * (`'langgraph'` by default) with one memory scope per thread; see
 * `records.ts` for the layout. Every write is one `memory.transact()`, so a
 * checkpoint, its channel values and its latest-pointer land together.
 *
 * It does not cache: every read goes to IndexedDB, which is what makes a
 * checkpoint written in another tab visible at once.
 */
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  maxChannelVersion,
  writesSortKey,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import { TabulaError, type MemoryTransaction, type Session, type Tabula } from '../index.js';
import {
  BlobRecordSchema,
  CheckpointRecordSchema,
  ThreadRecordSchema,
  WriteListSchema,
  fromBase64,
  keys,
  parseRecord,
  threadScope,
  toBase64,
  type BlobRecord,
  type CheckpointRecord,
  type Serialized,
  type WriteRecord,
} from './records.js';

/** Options of {@link TabulaCheckpointSaver}. */
export interface TabulaCheckpointSaverOptions {
  /** An open Tabula; the saver does not close it. */
  tabula: Tabula;
  /** The user whose data holds the threads. @default the Tabula's userId */
  userId?: string;
  /** The Tabula session that holds every thread. @default 'langgraph' */
  sessionId?: string;
  /** @default LangGraph's JsonPlusSerializer */
  serde?: SerializerProtocol;
}

const THREADS_SCOPE = 'langgraph:threads';

function requireString(value: unknown, field: string, what: string): string {
  if (typeof value !== 'string' || value === '') {
    throw new TabulaError(
      'argument/invalid',
      `${what}: config.configurable.${field} must be a non-empty string, got ${JSON.stringify(value)}. ` +
        `Pass it as graph.invoke(input, { configurable: { ${field}: "…" } }).`,
    );
  }
  return value;
}

/** Everything read for one checkpoint, before deserialization. */
interface LoadedCheckpoint {
  record: CheckpointRecord;
  writes: WriteRecord[];
  blobs: BlobRecord[];
  /** Pending sends of the parent, for checkpoints older than format v4. */
  parentSends: WriteRecord[];
}

/**
 * A LangGraph checkpointer over Tabula. Pass it to `graph.compile({ checkpointer })`.
 *
 * ```ts no-run
 * const checkpointer = new TabulaCheckpointSaver({ tabula });
 * const app = graph.compile({ checkpointer });
 * await app.invoke(input, { configurable: { thread_id: 'chat-1' } });
 * ```
 */
export class TabulaCheckpointSaver extends BaseCheckpointSaver {
  readonly #tabula: Tabula;
  readonly #userId: string | undefined;
  readonly #sessionId: string;
  #session: Promise<Session> | null = null;

  constructor(options: TabulaCheckpointSaverOptions) {
    super(options.serde);
    if (typeof options.tabula?.session !== 'function') {
      throw new TabulaError('argument/invalid', 'new TabulaCheckpointSaver({ tabula }): tabula must be an open Tabula (from openTabula()).');
    }
    this.#tabula = options.tabula;
    this.#userId = options.userId;
    this.#sessionId = options.sessionId ?? 'langgraph';
  }

  #open(): Promise<Session> {
    // Opened on first use, once: creating the session is a write, and a saver may never be used.
    this.#session ??= this.#tabula.session(this.#sessionId, this.#userId === undefined ? {} : { userId: this.#userId }).catch((error: unknown) => {
      this.#session = null;
      throw error;
    });
    return this.#session;
  }

  async #transact<T>(scope: string, fn: (tx: MemoryTransaction) => Promise<T>): Promise<T> {
    return (await this.#open()).memory(scope).transact(fn);
  }

  async #serialize(value: unknown): Promise<Serialized> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    // JSON stays readable text in IndexedDB and in sync payloads; anything else travels as base64.
    return type === 'json' ? { t: type, s: new TextDecoder().decode(bytes) } : { t: type, b64: toBase64(bytes) };
  }

  #deserialize(value: Serialized): Promise<unknown> {
    return 's' in value ? this.serde.loadsTyped(value.t, value.s) : this.serde.loadsTyped(value.t, fromBase64(value.b64));
  }

  /** Reads a checkpoint and everything its tuple needs, inside one transaction. */
  async #load(tx: MemoryTransaction, scope: string, ns: string, id: string): Promise<LoadedCheckpoint | undefined> {
    const key = keys.checkpoint(ns, id);
    const raw = await tx.get(key);
    if (raw === undefined) return undefined;
    const record = parseRecord(CheckpointRecordSchema, raw, key, scope);
    if (record.id !== id || record.ns !== ns) return undefined;
    const writesKey = keys.writes(ns, id);
    const writes = parseRecord(WriteListSchema, (await tx.get(writesKey)) ?? [], writesKey, scope);
    return { record, writes, blobs: [], parentSends: [] };
  }

  /** Fetches the channel values named by the checkpoint's versions, and the parent's sends for old checkpoints. */
  async #complete(tx: MemoryTransaction, scope: string, loaded: LoadedCheckpoint, checkpoint: Checkpoint): Promise<void> {
    const { ns, parentId } = loaded.record;
    for (const [channel, version] of Object.entries(checkpoint.channel_versions)) {
      const key = keys.blob(ns, channel, version);
      const raw = await tx.get(key);
      if (raw === undefined) continue;
      const blob = parseRecord(BlobRecordSchema, raw, key, scope);
      if (blob.channel === channel && blob.version === version) loaded.blobs.push(blob);
    }
    if (checkpoint.v < 4 && parentId !== null) {
      const parent = await this.#load(tx, scope, ns, parentId);
      loaded.parentSends = (parent?.writes ?? []).filter((write) => write.channel === TASKS);
    }
  }

  async #read(threadId: string, ns: string, id: string | undefined): Promise<CheckpointTuple | undefined> {
    const scope = threadScope(threadId);
    const found = await this.#transact(scope, async (tx) => {
      const latest = id ?? (await tx.get<string>(keys.latest(ns)));
      if (latest === undefined) return undefined;
      const loaded = await this.#load(tx, scope, ns, latest);
      if (!loaded) return undefined;
      // The checkpoint is parsed here to learn its channel versions; #toTuple reuses it.
      const checkpoint = (await this.#deserialize(loaded.record.checkpoint)) as Checkpoint;
      await this.#complete(tx, scope, loaded, checkpoint);
      return { loaded, checkpoint };
    });
    if (!found) return undefined;
    return this.#toTuple(threadId, found.loaded, found.checkpoint, (await this.#deserialize(found.loaded.record.metadata)) as CheckpointMetadata);
  }

  async #toTuple(threadId: string, loaded: LoadedCheckpoint, checkpoint: Checkpoint, metadata: CheckpointMetadata): Promise<CheckpointTuple> {
    const { ns, id, parentId } = loaded.record;
    const channelValues: Record<string, unknown> = {};
    for (const blob of loaded.blobs) channelValues[blob.channel] = await this.#deserialize(blob.value);
    checkpoint.channel_values = channelValues;
    if (loaded.parentSends.length > 0 || (checkpoint.v < 4 && parentId !== null)) {
      // Checkpoints before format v4 kept pending sends as writes on the parent; v4 keeps them in a channel.
      const sorted = [...loaded.parentSends].sort((a, b) => compareWritesSortKeys(writesSortKey(a.taskPath, a.taskId, a.idx), writesSortKey(b.taskPath, b.taskId, b.idx)));
      checkpoint.channel_values[TASKS] = await Promise.all(sorted.map((write) => this.#deserialize(write.value)));
      const versions = Object.values(checkpoint.channel_versions);
      checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
    }
    const writes = [...loaded.writes].sort((a, b) => compareWritesSortKeys(writesSortKey(a.taskPath, a.taskId, a.idx), writesSortKey(b.taskPath, b.taskId, b.idx)));
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      writes.map(async (write): Promise<CheckpointPendingWrite> => [write.taskId, write.channel, await this.#deserialize(write.value)]),
    );
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } },
      checkpoint,
      metadata,
      pendingWrites,
    };
    if (parentId !== null) tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: parentId } };
    return tuple;
  }

  /** The checkpoint tuple named by `config` (its `checkpoint_id`, else the thread's newest one); undefined without a thread_id. */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    if (config.configurable?.thread_id === undefined) return undefined;
    const threadId = requireString(config.configurable.thread_id, 'thread_id', 'getTuple()');
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? '';
    const id = config.configurable?.checkpoint_id as string | undefined;
    return this.#read(threadId, ns, id === undefined || id === '' ? undefined : id);
  }

  /** Checkpoints newest first, across threads when `config` names none; `filter` matches metadata fields. */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let { limit } = options;
    const wantedNs = config.configurable?.checkpoint_ns as string | undefined;
    const wantedId = config.configurable?.checkpoint_id as string | undefined;
    const beforeId = before?.configurable?.checkpoint_id as string | undefined;
    const threadIds =
      config.configurable?.thread_id !== undefined
        ? [requireString(config.configurable.thread_id, 'thread_id', 'list()')]
        : await this.#threads();
    for (const threadId of threadIds) {
      const scope = threadScope(threadId);
      const prefix = wantedNs === undefined ? 'c:' : keys.checkpointPrefix(wantedNs);
      const records = await this.#transact(scope, async (tx) => {
        const found: CheckpointRecord[] = [];
        for (const [key, value] of await tx.entries(prefix)) {
          const record = parseRecord(CheckpointRecordSchema, value, key, scope);
          if (record.threadId !== threadId || (wantedNs !== undefined && record.ns !== wantedNs)) continue;
          if (wantedId && record.id !== wantedId) continue;
          if (beforeId && record.id >= beforeId) continue;
          found.push(record);
        }
        return found;
      });
      // Newest first within each namespace, as MemorySaver and the SQL savers order them.
      records.sort((a, b) => (a.ns === b.ns ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.ns < b.ns ? -1 : 1));
      for (const record of records) {
        if (limit !== undefined && limit <= 0) return;
        const metadata = (await this.#deserialize(record.metadata)) as CheckpointMetadata;
        if (filter && !Object.entries(filter).every(([key, value]) => (metadata as Record<string, unknown>)[key] === value)) continue;
        const tuple = await this.#read(threadId, record.ns, record.id);
        if (!tuple) continue;
        if (limit !== undefined) limit -= 1;
        yield tuple;
      }
    }
  }

  async #threads(): Promise<string[]> {
    return this.#transact(THREADS_SCOPE, async (tx) => {
      const threads: string[] = [];
      for (const [key, value] of await tx.entries()) threads.push(parseRecord(ThreadRecordSchema, value, key, THREADS_SCOPE).threadId);
      return threads;
    });
  }

  /**
   * Stores a checkpoint. Only the channel values named in `newVersions`
   * are written; the others are already stored at their current version.
   */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = requireString(config.configurable?.thread_id, 'thread_id', 'put()');
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? '';
    const parentId = (config.configurable?.checkpoint_id as string | undefined) || null;
    const prepared = copyCheckpoint(checkpoint);
    const blobs: BlobRecord[] = [];
    for (const [channel, version] of Object.entries(newVersions)) {
      if (channel in prepared.channel_values) blobs.push({ channel, version, value: await this.#serialize(prepared.channel_values[channel]) });
    }
    prepared.channel_values = {};
    const record: CheckpointRecord = {
      threadId,
      ns,
      id: checkpoint.id,
      parentId,
      checkpoint: await this.#serialize(prepared),
      metadata: await this.#serialize(metadata),
    };
    const scope = threadScope(threadId);
    await this.#transact(THREADS_SCOPE, async (tx) => {
      if ((await tx.get(scope)) === undefined) await tx.set(scope, { threadId });
    });
    await this.#transact(scope, async (tx) => {
      await tx.set(keys.checkpoint(ns, checkpoint.id), record);
      for (const blob of blobs) await tx.set(keys.blob(ns, blob.channel, blob.version), blob);
      const latest = await tx.get<string>(keys.latest(ns));
      if (latest === undefined || checkpoint.id > latest) await tx.set(keys.latest(ns), checkpoint.id);
    });
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  /**
   * Stores the writes of one task against a checkpoint. A regular write
   * already stored (same task and index) is kept, as LangGraph requires;
   * special channels (errors, interrupts) are overwritten.
   */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ''): Promise<void> {
    const threadId = requireString(config.configurable?.thread_id, 'thread_id', 'putWrites()');
    const checkpointId = requireString(config.configurable?.checkpoint_id, 'checkpoint_id', 'putWrites()');
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? '';
    const incoming: WriteRecord[] = await Promise.all(
      writes.map(async ([channel, value], index) => ({ taskId, channel, idx: WRITES_IDX_MAP[channel] ?? index, taskPath, value: await this.#serialize(value) })),
    );
    const scope = threadScope(threadId);
    const key = keys.writes(ns, checkpointId);
    await this.#transact(scope, async (tx) => {
      const stored = parseRecord(WriteListSchema, (await tx.get(key)) ?? [], key, scope);
      let changed = false;
      for (const write of incoming) {
        const at = stored.findIndex((s) => s.taskId === write.taskId && s.idx === write.idx);
        if (at === -1) stored.push(write);
        else if (write.idx < 0) stored[at] = write;
        else continue;
        changed = true;
      }
      if (changed) await tx.set(key, stored);
    });
  }

  /** Deletes every checkpoint and write of a thread, in every namespace. */
  async deleteThread(threadId: string): Promise<void> {
    requireString(threadId, 'thread_id', 'deleteThread()');
    const scope = threadScope(threadId);
    await (await this.#open()).memory(scope).clear();
    await this.#transact(THREADS_SCOPE, (tx) => tx.delete(scope));
  }
}
