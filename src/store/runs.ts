/**
 * Runs: one agent turn on a session, with the semantics of a transactional step.
 * - A Web Lock per session gates runs across tabs; other sessions run in
 *   parallel. `wait: false` refuses with `run/busy` instead of queueing.
 * - `ctx.set()` buffers changes to the session's `state.context`; they are
 *   validated and committed with the run's final status in one transaction
 *   when `fn` resolves, and dropped when it throws or is interrupted.
 * - Notes, memory and appended messages are saved at once and kept
 *   whatever the outcome. Writes after the run ended throw `run/stale`.
 * - `visit` counts runs per scope, `attempt` counts starts of one runId.
 *
 * Interruption is cooperative: `interrupt()` aborts `ctx.signal`; `fn`
 * should pass it on (fetch, streams) and return or throw promptly.
 */
import type { z } from 'zod';
import { checkOptions, describeValue } from '../core/args.js';
import { TabulaError, isTabulaError } from '../core/errors.js';
import { assertJsonValue, assertSafeKey, cloneJson, type JsonValue } from '../core/json.js';
import type { Message } from '../core/message.js';
import { checkContextSchema } from './context-schema.js';
import { newId } from './ids.js';
import { checkScope, createMemory } from './memory.js';
import { addNote } from './notes.js';
import { checkRow, lifeOf, type RunRow, type SessionRow } from './db/rows.js';
import type { Memory, RunInfo, StoredMessage } from './types.js';
import type { ActiveRun, StoreContext } from './context.js';
import { commit, sessionNotFound } from './writer.js';

/** What a run's function gets. */
export interface RunContext {
  /** 32 lowercase hex characters, or the runId the caller gave, kept as is. */
  readonly runId: string;
  /** The session's user. */
  readonly userId: string;
  /** The session the run holds. */
  readonly sessionId: string;
  /** The run's scope (`RunOptions.scope`): visits are counted and memory kept per scope. */
  readonly scope: string;
  /** 1 on the first run in this scope of this session, then 2, … */
  readonly visit: number;
  /** 1, then 2 when the same runId is started again, … */
  readonly attempt: number;
  /** Aborted by session.interrupt() from any tab, or by the caller's signal. */
  readonly signal: AbortSignal;
  /** A value of the session's context, as this run sees it (a copy). */
  get(key: string): JsonValue | undefined;
  /** Buffers a context change: saved with the run's success, dropped on failure. */
  set(key: string, value: JsonValue): void;
  /** A progress line stamped with this run; saved at once. */
  note(text: string): Promise<void>;
  /** Memory of this run's scope; saved at once. */
  readonly memory: Memory;
  /** Appends messages; saved at once. */
  append(message: Message | Message[]): Promise<StoredMessage[]>;
}

/** How `session.run()` starts a run. */
export interface RunOptions {
  /** Groups runs for visit counting and memory. @default 'default' */
  scope?: string;
  /** Correlates a run across systems; kept as is. @default a new 32-hex id */
  runId?: string;
  /** Aborts the run like interrupt() does. */
  signal?: AbortSignal;
  /** false: throw run/busy when another run holds the session. @default true */
  wait?: boolean;
}

export interface RunnerDeps {
  store: StoreContext;
  userId: string;
  sessionId: string;
  label: string;
  contextSchema: z.ZodObject | undefined;
  /** The session life the runs must start on (the handle's, see SessionHandleInit.life); absent: whatever life the session has. */
  life?: string;
  /** Appends to the session only while it is the one whose life (see `lifeOf`) is `life`. */
  append(message: Message | Message[], life: string): Promise<StoredMessage[]>;
}

function checkRunId(runId: unknown): string {
  if (typeof runId !== 'string' || runId.trim() === '' || runId.length > 128) {
    throw new TabulaError('argument/invalid', `A runId must be a non-blank string of at most 128 characters, got ${describeValue(runId)}.`);
  }
  return runId;
}

/**
 * Whether the current call comes from inside the run whose fn is invoked by
 * the function named `marker`. V8 (Chromium, Node) lists the async functions
 * awaiting the current one in `Error().stack`, so a run() that fn awaits,
 * however deep, names the marker; elsewhere only the synchronous check of
 * {@link ActiveRun.synchronous} applies.
 */
function calledFromRun(marker: string): boolean {
  const errorClass = Error as { stackTraceLimit?: number };
  const limit = errorClass.stackTraceLimit;
  // A deep call chain must not cut the marker off the trace.
  errorClass.stackTraceLimit = Infinity;
  try {
    return new Error().stack?.includes(marker) ?? false;
  } finally {
    errorClass.stackTraceLimit = limit;
  }
}

function isAbortSignal(value: unknown): value is AbortSignal {
  if (typeof AbortSignal === 'function' && value instanceof AbortSignal) return true;
  const candidate = value as Partial<AbortSignal> | null;
  return typeof candidate === 'object' && candidate !== null && typeof candidate.aborted === 'boolean' && typeof candidate.addEventListener === 'function';
}

function stale(runId: string, what: string): TabulaError {
  return new TabulaError('run/stale', `Run ${runId} has ended; ${what} through its context is refused. Start a new run to write.`);
}

/** Builds `session.run` and `session.interrupt` for one session. */
export function createRunner(deps: RunnerDeps) {
  const { store, userId, sessionId, label, contextSchema } = deps;
  const { db, coordinator } = store;

  /** The session's runs marked running (in the caller's transaction, if any). */
  const runningRows = () => db.runs.where('[userId+sessionId+status]').equals([userId, sessionId, 'running']).toArray();

  /** Records the start: visit and attempt, and the context the run reads from. */
  const start = (runId: string, scope: string) =>
    commit(store, userId, sessionId, `start run ${runId} (${label})`, async (tx) => {
      const row = tx.existing(deps.life);
      // We hold the session's lock: any run still marked running was left by a tab that is gone.
      const leftOver = await runningRows();
      for (const run of leftOver) await db.runs.put({ ...run, status: 'abandoned', endedAt: run.endedAt ?? Date.now() });
      const previous = await db.runs.get(runId);
      if (previous && (previous.userId !== userId || previous.sessionId !== sessionId)) {
        throw new TabulaError('argument/invalid', `runId ${JSON.stringify(runId)} already belongs to another session; give each session's runs their own ids.`);
      }
      const visit = previous ? previous.visit : (await db.runs.where('[userId+sessionId+scope]').equals([userId, sessionId, scope]).count()) + 1;
      const attempt = previous ? previous.attempt + 1 : 1;
      const record: RunRow = { runId, userId, sessionId, scope: previous?.scope ?? scope, visit, attempt, status: 'running', startedAt: Date.now(), endedAt: null };
      await db.runs.put(record);
      return { record, context: cloneJson(row.state.context), life: lifeOf(row) };
    });

  /**
   * Ends the run: commits the buffered context (on success) and the final status in one transaction.
   * A session deleted (and perhaps re-created) while the run was in flight is not the one the run
   * started on: nothing is written to it, its run row included, and a succeeding run fails with
   * `session/not-found` rather than reporting a context that was never saved.
   */
  const finish = (record: RunRow, life: string, status: RunRow['status'], changes: Map<string, JsonValue> | null) =>
    commit(store, userId, sessionId, `finish run ${record.runId} (${label})`, async (tx) => {
      const row: SessionRow | undefined = tx.row();
      if (!row || lifeOf(row) !== life) {
        if (status === 'succeeded') throw sessionNotFound(userId, sessionId);
        return;
      }
      if (changes && changes.size > 0) {
        const context = { ...row.state.context, ...Object.fromEntries(changes) };
        checkContextSchema(
          contextSchema,
          context,
          `Run ${record.runId} was rolled back: its context changes`,
          ' Nothing of its context was saved; notes, memory and messages stay.',
        );
        await tx.emit('state.save', { version: row.version + 1, patch: { ...row.state, context }, base: row.versionOrder ?? '' });
      }
      await db.runs.put({ ...record, status, endedAt: Date.now() });
    });

  async function run<T>(fn: (ctx: RunContext) => Promise<T>, runOptions?: RunOptions): Promise<T> {
    if (typeof fn !== 'function') throw new TabulaError('argument/invalid', 'run(fn) takes an async function (ctx) => result.');
    const options = checkOptions(runOptions, 'run(fn, options)');
    const scope = options.scope === undefined ? 'default' : checkScope(options.scope);
    if (options.signal !== undefined && !isAbortSignal(options.signal)) {
      throw new TabulaError('argument/invalid', `run(fn, { signal }) takes an AbortSignal, got ${describeValue(options.signal)}.`);
    }
    if (options.wait !== undefined && typeof options.wait !== 'boolean') {
      throw new TabulaError('argument/invalid', `run(fn, { wait }) takes true or false, got ${describeValue(options.wait)}.`);
    }
    const runId = options.runId === undefined ? newId() : checkRunId(options.runId);
    const wait = options.wait ?? true;
    const outer = options.signal;
    if (outer?.aborted) throw new TabulaError('run/interrupted', `Run ${runId} was not started: its signal is already aborted.`, { cause: outer.reason });

    const lockName = coordinator.runLockName(userId, sessionId);
    // A run started from inside a run of the same session would wait for the lock its own caller holds:
    // both would hang, and every later run with them. Refuse it at once instead.
    const active = store.activeRuns.get(lockName);
    if (active && (active.synchronous || calledFromRun(active.marker))) {
      throw new TabulaError(
        'run/nested',
        `run() was called from inside a run of ${label}; runs of one session do not nest (the inner one would wait for the outer one forever). ` +
          'Do the work in the outer run through its ctx, or start the second run after the first has finished.',
      );
    }
    coordinator.listen();
    const held = coordinator.locks.request(lockName, { ifAvailable: !wait, ...(outer ? { signal: outer } : {}) }, async (lock) => {
      if (!lock) {
        throw new TabulaError('run/busy', `Another run holds ${label} (in this tab or another); wait for it, interrupt() it, or call run() without wait: false to queue.`);
      }
      const controller = new AbortController();
      let interruptReason: string | null = null;
      const abort = (reason: string | null) => {
        if (controller.signal.aborted) return;
        interruptReason = reason;
        controller.abort(new TabulaError('run/interrupted', `Run ${runId} on ${label} was interrupted${reason ? `: ${reason}` : ''}.`));
      };
      const forget = coordinator.register(userId, sessionId, runId, abort);
      const onOuterAbort = () => abort(typeof outer?.reason === 'string' ? outer.reason : 'the caller aborted it');
      outer?.addEventListener('abort', onOuterAbort, { once: true });
      try {
        const { record, context, life } = await start(runId, scope);
        const changes = new Map<string, JsonValue>();
        let ended = false;
        const live = (what: string) => {
          if (ended) throw stale(runId, what);
        };
        // Every write through ctx is bound to this life of the session: after a delete and re-create it fails.
        const memory = createMemory(store, userId, sessionId, record.scope, life);
        const ctx: RunContext = {
          runId,
          userId,
          sessionId,
          scope: record.scope,
          visit: record.visit,
          attempt: record.attempt,
          signal: controller.signal,
          get(key) {
            const value = changes.has(key) ? changes.get(key) : context[key];
            return value === undefined ? undefined : cloneJson(value);
          },
          set(key, value) {
            live(`set(${describeValue(key)})`);
            if (typeof key !== 'string' || key === '') throw new TabulaError('argument/invalid', 'ctx.set(key, value) takes a non-empty string key.');
            assertSafeKey(key, `run ${runId} context key`);
            changes.set(key, cloneJson(assertJsonValue(value, `run ${runId} context key ${JSON.stringify(key)}`)));
          },
          async note(text) {
            live('a note');
            await addNote(store, { userId, sessionId, label, life }, text, { runId, scope: record.scope });
          },
          memory: {
            get: (key) => memory.get(key),
            keys: () => memory.keys(),
            async set(key, value) {
              live(`memory.set(${describeValue(key)})`);
              await memory.set(key, value);
            },
            async delete(key) {
              live(`memory.delete(${describeValue(key)})`);
              await memory.delete(key);
            },
            async clear() {
              live('memory.clear()');
              await memory.clear();
            },
            async transact(fn) {
              live('memory.transact()');
              return memory.transact(fn);
            },
          },
          async append(message) {
            live('an append');
            return deps.append(message, life);
          },
        };

        const interrupted = (cause?: unknown) =>
          new TabulaError(
            'run/interrupted',
            `Run ${runId} on ${label} was interrupted${interruptReason ? `: ${interruptReason}` : ''}; its context changes were dropped.`,
            { cause },
          );
        let value: T;
        const marker = `tabulaRun_${newId()}`;
        const active: ActiveRun = { marker, synchronous: true };
        // Named for this run, so that calledFromRun() finds it in the stack of anything fn awaits.
        const invoke = { async [marker](body: typeof fn, context: RunContext): Promise<T> { return await body(context); } }[marker]!;
        try {
          if (controller.signal.aborted) throw controller.signal.reason;
          store.activeRuns.set(lockName, active);
          let pending: Promise<T>;
          try {
            pending = invoke(fn, ctx);
          } finally {
            active.synchronous = false;
          }
          value = await pending;
        } catch (error) {
          ended = true;
          const wasInterrupted = controller.signal.aborted;
          await finish(record, life, wasInterrupted ? 'interrupted' : 'failed', null);
          throw wasInterrupted ? interrupted(error) : error;
        }
        ended = true;
        // fn finished, but after an interrupt: its result may rest on work cut short, so it is not committed.
        if (controller.signal.aborted) {
          await finish(record, life, 'interrupted', null);
          throw interrupted();
        }
        try {
          await finish(record, life, 'succeeded', changes);
        } catch (error) {
          await finish(record, life, 'failed', null);
          throw error;
        }
        return value;
      } finally {
        // We hold the session's lock, so the entry under its name, if any, is this run's.
        store.activeRuns.delete(lockName);
        forget();
        outer?.removeEventListener('abort', onOuterAbort);
      }
    });
    try {
      return await held;
    } catch (error) {
      // A run still queued for the lock when its signal aborts gets the platform's AbortError.
      if (outer?.aborted && !isTabulaError(error)) {
        throw new TabulaError('run/interrupted', `Run ${runId} was not started: its signal aborted while it waited for ${label}.`, { cause: error });
      }
      throw error;
    }
  }

  /** Aborts the run in flight on this session, in any tab; false when idle. */
  async function interrupt(reason?: string): Promise<boolean> {
    if (reason !== undefined && typeof reason !== 'string') throw new TabulaError('argument/invalid', 'interrupt(reason) takes a string reason or nothing.');
    return coordinator.interrupt(userId, sessionId, reason ?? null, runInFlight);
  }

  /**
   * The run another tab holds the session for, as the runs table says: while that run holds the lock its row
   * is the only one marked running. Null when that cannot be told (the run has not recorded its start yet, or
   * the read failed): the interrupt then stops whichever run the other tab has in flight, as it did unnamed.
   * In the moment before a run records its start, a row left `running` by a crashed tab names a run that is
   * gone: that interrupt stops nothing and resolves false, and a second interrupt() finds the new run's row.
   */
  const runInFlight = () => runningRows().then((rows) => (rows.length === 1 ? rows[0]!.runId : null), () => null);

  /** The session's runs, oldest first. */
  async function runs(): Promise<RunInfo[]> {
    const rows = await db.runs.where('[userId+sessionId+scope]').between([userId, sessionId, ''], [userId, sessionId, '\uffff']).toArray();
    return rows
      .map((row) => checkRow('runs', row.runId, row))
      .sort((a, b) => a.startedAt - b.startedAt)
      .map(({ runId: id, scope, visit, attempt, status, startedAt, endedAt }) => Object.freeze({ runId: id, scope, visit, attempt, status, startedAt, endedAt }));
  }

  return { run, interrupt, runs };
}
