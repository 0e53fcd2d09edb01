/**
 * Convergence of the one write path (property): three devices write to one
 * session without seeing each other, deleting it and creating it again as
 * they go, then each op reaches a replica in any order that keeps each
 * device's own order (as sync delivers them), in random batches. Every
 * replica must end equal to one that applied all ops in order-key order.
 * Each device stamps its ops with the life they were written in, as the
 * writer does (`Op.after`); a run without lives (ops from before they were
 * named) leaves re-creates out, which those ops cannot order. Every device
 * starts from the same few messages and a checkpoint of them, so devices
 * restore it and remove its messages concurrently; saves and restores are
 * numbered from each device's own view, so their versions clash (issue 26).
 * A second property has two devices import one history into one id, each
 * from its own export of it, and write on (issue 26).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, parseOp, type Op, type OpBody, type OpKind } from '../../../../src/core/index.js';
import { formatHlc, hlcOf, subOrder } from '../../../../src/core/hlc.js';
import { applyOps, StaleKnownRow, type ApplyOptions, type AppendOp } from '../../../../src/store/apply/index.js';
import type { SessionExport } from '../../../../src/store/session/export-format.js';
import { importInto } from '../../../../src/store/session/index.js';
import type { Emitter } from '../../../../src/store/writer.js';
import { createKnownRows } from '../../../../src/store/known-rows.js';
import { createDb, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import type { SessionRow } from '../../../../src/store/db/rows.js';
import { fcParams } from '../../seed.js';
import { expectStreamIndexExact, uniqueName, withoutLife } from '../helpers.js';

type Action =
  | { kind: 'append'; streaming: boolean }
  | { kind: 'finish'; status: 'complete' | 'interrupted' }
  | { kind: 'grow' }
  | { kind: 'prefix' }
  | { kind: 'memorySet'; key: 'a' | 'b'; value: number }
  | { kind: 'memoryDelete'; key: 'a' | 'b' }
  | { kind: 'note' }
  | { kind: 'journal'; entries: number }
  | { kind: 'commit' }
  | { kind: 'clear' }
  | { kind: 'checkpoint' }
  | { kind: 'restore'; pick: number }
  | { kind: 'remove'; pick: number }
  | { kind: 'save' }
  | { kind: 'delete' }
  | { kind: 'create' }
  | { kind: 'tick'; ms: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('append' as const), streaming: fc.boolean() }), weight: 4 },
  fc.record({ kind: fc.constant('finish' as const), status: fc.constantFrom('complete' as const, 'interrupted' as const) }),
  fc.record({ kind: fc.constant('grow' as const) }),
  fc.record({ kind: fc.constant('prefix' as const) }),
  { arbitrary: fc.record({ kind: fc.constant('memorySet' as const), key: fc.constantFrom('a' as const, 'b' as const), value: fc.integer() }), weight: 2 },
  fc.record({ kind: fc.constant('memoryDelete' as const), key: fc.constantFrom('a' as const, 'b' as const) }),
  fc.record({ kind: fc.constant('note' as const) }),
  fc.record({ kind: fc.constant('journal' as const), entries: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('commit' as const) }),
  fc.record({ kind: fc.constant('clear' as const) }),
  fc.record({ kind: fc.constant('checkpoint' as const) }),
  { arbitrary: fc.record({ kind: fc.constant('restore' as const), pick: fc.nat() }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }), weight: 3 },
  { arbitrary: fc.constant({ kind: 'save' as const }), weight: 2 },
  { arbitrary: fc.constant({ kind: 'delete' as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: 'create' as const }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 5 }) }), weight: 3 },
);

type Known = { id: string; order: string };

/** What every device has before its own ops: the session, three messages and a checkpoint of them. */
/** What a device has of the session before its own ops: the ops that made it, and its view of them. */
interface Prelude {
  readonly ops: readonly Op[];
  readonly messages: readonly Known[];
  readonly checkpoints: readonly { id: string; messages: Known[] }[];
  /** The version of the session's state and the order of the save that set it (none: 0 and ''). */
  readonly version?: number;
  readonly base?: string;
  /** The life it is in (see `Op.after`): '' unless the session was deleted before. */
  readonly after?: string;
}

function preludeOps(lives: boolean): Prelude {
  const clock = createHlc({ clientId: '0', wallClock: () => 1_699_999_999_999 });
  const life = lives ? { after: '' } : {};
  const make = <K extends OpKind>(id: string, kind: K, body: OpBody<K>) => ({ id, kind, userId: 'u', sessionId: 's', order: clock.now(), ...life, body }) as Op;
  const create = make('create', 'session.create', { createdAt: 1, forkOf: null });
  const appends = [0, 1, 2].map((i) => make(`shared-op${i}`, 'message.append', { id: `shared${i}`, createdAt: 0, status: 'complete', message: { role: 'user', content: `shared ${i}` } }));
  const messages = appends.map((a) => ({ id: (a.body as { id: string }).id, order: a.order }));
  const checkpoint = make('shared-cp', 'checkpoint.create', { id: 'shared-cp', label: null, at: 0, snapshot: snapshotOf(messages) });
  return { ops: [create, ...appends, checkpoint], messages, checkpoints: [{ id: 'shared-cp', messages }] };
}

/** A checkpoint snapshot of `messages`, as the store writes one. */
function snapshotOf(messages: readonly Known[]): OpBody<'checkpoint.create'>['snapshot'] {
  return {
    prefix: { systemPrompt: 'cp', grounding: [], schemaBlock: null },
    state: { summary: 'cp', tasks: null, plan: null, permissions: null, tools: [], context: {} },
    messages: messages.map((m) => ({ ...m, createdAt: 0, status: 'complete' as const, message: { role: 'user' as const, content: m.id } })),
  };
}

/**
 * One device's ops, made by its own clock (skewed by `skewMs`), the way its session handle would: with
 * `lives`, each op names the life it was written in, and after a delete the device may create the
 * session again; it writes nothing while the session is gone here. It keeps its own view of the
 * session's messages, checkpoints and version, on which it builds removes, restores and saves.
 */
function deviceOps(device: string, skewMs: number, actions: Action[], lives: boolean, prelude: Prelude): Op[] {
  let wall = 1_700_000_000_000 + skewMs;
  const clock = createHlc({ clientId: device, wallClock: () => wall });
  // The device has the session, so its clock has seen the prelude (a clock behind it moves past it).
  clock.receive(hlcOf((prelude.ops.at(-1) as Op).order));
  let seq = 0;
  let journalCount = 0;
  let lastEntry: string | undefined;
  let streaming: string[] = [];
  // The device's view: messages it knows of, its checkpoints, and the version and order of its state.
  let known: Known[] = [...prelude.messages];
  let checkpoints: { id: string; messages: Known[] }[] = [...prelude.checkpoints];
  let version = prelude.version ?? 0;
  let base = prelude.base ?? '';
  const ops: Op[] = [];
  // The device's current life ('' the shared first one) and whether the session exists on it.
  let after = prelude.after ?? '';
  let exists = true;
  const make = <K extends OpKind>(kind: K, body: OpBody<K>) => {
    const op = { id: `${device}-op${++seq}`, kind, userId: 'u', sessionId: 's', order: clock.now(), ...(lives ? { after } : {}), body } as Op;
    ops.push(op);
    return op;
  };
  for (const action of actions) {
    if (action.kind === 'tick') {
      wall += action.ms;
      continue;
    }
    if (action.kind === 'create') {
      if (exists || !lives) continue;
      make('session.create', { createdAt: seq, forkOf: null });
      exists = true;
      known = [];
      checkpoints = [];
      version = 0;
      base = '';
      continue;
    }
    if (!exists) continue;
    switch (action.kind) {
      case 'append': {
        const id = `${device}-m${seq}`;
        const appended = make('message.append', { id, createdAt: seq, status: action.streaming ? 'streaming' : 'complete', message: { role: 'assistant', content: `${device} ${seq}` } });
        if (action.streaming) streaming.push(id);
        known.push({ id, order: appended.order });
        break;
      }
      case 'grow':
      case 'finish': {
        const id = streaming.at(-1);
        if (!id) break;
        const status = action.kind === 'grow' ? 'streaming' : action.status;
        make('message.update', { id, status, message: { role: 'assistant', content: `${id} ${status} at ${seq}` } });
        if (status !== 'streaming') streaming.pop();
        break;
      }
      case 'prefix':
        make('prefix.set', { prefix: { systemPrompt: `${device} ${seq}`, grounding: [], schemaBlock: null } });
        break;
      case 'memorySet':
        make('memory.set', { scope: 'default', key: action.key, value: action.value });
        break;
      case 'memoryDelete':
        make('memory.delete', { scope: 'default', key: action.key });
        break;
      case 'note':
        make('note.add', { text: `${device} ${seq}`, runId: null, scope: null, at: seq });
        break;
      case 'journal':
        journalCount += action.entries;
        lastEntry = subOrder(make('journal.append', { entries: Array.from({ length: action.entries }, (_, i) => `${device}${seq}.${i}`) }).order, action.entries - 1);
        break;
      case 'commit':
        // The session handle names the last entry it has seen; an empty journal has nothing to commit.
        if (lastEntry !== undefined) make('journal.commit', { watermark: journalCount, through: lastEntry });
        break;
      case 'clear':
        make('session.clear', {});
        known = [];
        break;
      case 'checkpoint': {
        const id = `${device}-cp${seq}`;
        // Of complete messages only: a copy of a streaming one would be interrupted, and the stream goes on.
        const messages = known.filter((m) => !streaming.includes(m.id));
        make('checkpoint.create', { id, label: null, at: seq, snapshot: snapshotOf(messages) });
        checkpoints.push({ id, messages });
        break;
      }
      case 'restore': {
        const checkpoint = checkpoints[action.pick % Math.max(1, checkpoints.length)];
        if (!checkpoint) break;
        const restored = make('checkpoint.restore', { id: checkpoint.id, version: version + 1, base });
        known = checkpoint.messages.map((m, index) => ({ id: m.id, order: subOrder(restored.order, index) }));
        streaming = [];
        version += 1;
        base = restored.order;
        break;
      }
      case 'remove': {
        const target = known[action.pick % Math.max(1, known.length)];
        if (!target) break;
        make('message.remove', { id: target.id });
        known = known.filter((m) => m.id !== target.id);
        streaming = streaming.filter((id) => id !== target.id);
        break;
      }
      case 'save': {
        const saved = make('state.save', { version: version + 1, patch: { summary: null, tasks: `${device} ${seq}`, plan: null, permissions: null, tools: [], context: {} }, base });
        version += 1;
        base = saved.order;
        break;
      }
      case 'delete':
        after = make('session.delete', {}).order;
        exists = false;
        journalCount = 0;
        lastEntry = undefined;
        streaming = [];
        break;
    }
  }
  return ops;
}

async function replicaOf(batches: Op[][]): Promise<TabulaDb> {
  const db = createDb(uniqueName('converge'));
  for (const batch of batches) await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch));
  return db;
}

async function contents(db: TabulaDb): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const table of sessionTables(db)) {
    if (table.name === 'outbox') continue;
    out[table.name] = (await table.toArray()).map(withoutLife);
  }
  await expectStreamIndexExact(db);
  db.close();
  return out;
}

/** Three devices' ops (see deviceOps), in order-key order and as a random causal merge cut into random batches. */
const scenarioArb = fc
  .tuple(
    fc.boolean(),
    fc.array(fc.array(actionArb, { maxLength: 20 }), { minLength: 3, maxLength: 3 }),
    fc.array(fc.integer({ min: -3, max: 3 }), { minLength: 3, maxLength: 3 }),
    fc.infiniteStream(fc.integer({ min: 0, max: 5 })),
  )
  .map(([lives, actions, skews, choices]) => {
    const prelude = preludeOps(lives);
    const devices = ['a', 'b', 'c'].map((device, index) => deviceOps(device, skews[index]!, actions[index]!, lives, prelude));
    const sorted = [...prelude.ops, ...devices.flat()].sort((x, y) => (x.order < y.order ? -1 : 1));
    // A random merge of the devices' ops that keeps each one's order, cut into random batches.
    const picks = choices[Symbol.iterator]();
    const batches: Op[][] = [[...prelude.ops]];
    const next = devices.map(() => 0);
    for (let left = sorted.length - prelude.ops.length; left > 0; left--) {
      const choice = picks.next().value as number;
      const open = devices.flatMap((ops, index) => (next[index]! < ops.length ? [index] : []));
      const device = open[choice % open.length]!;
      if (choice >= 3) batches.push([]);
      batches.at(-1)!.push(devices[device]![next[device]!++]!);
    }
    return { sorted, batches };
  });

/**
 * A replica applying `batches` as the sync leader of one tab does: on the session rows it knows
 * (`known`), recording the rows each batch leaves once it commits, applying again from the stored rows
 * when a known one is stale. The batches `otherTab` marks are applied by another tab instead, which the
 * leader does not hear of, so its known row goes stale. Returns how often a batch found a known row
 * stale when no other tab had written since the leader's last batch (it must be never).
 */
async function replicaWithKnownRows(batches: Op[][], otherTab: readonly boolean[]): Promise<{ db: TabulaDb; needlessRetries: number }> {
  const db = createDb(uniqueName('known'));
  const known = createKnownRows();
  let needlessRetries = 0;
  let writtenBehind = false;
  for (const [index, batch] of batches.entries()) {
    if (otherTab[index]) {
      await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch));
      writtenBehind = true;
      continue;
    }
    const settled: NonNullable<ApplyOptions['settled']> = [];
    try {
      await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch, { known, settled }));
    } catch (error) {
      if (!(error instanceof StaleKnownRow)) throw error;
      if (!writtenBehind) needlessRetries += 1;
      settled.length = 0;
      await db.transaction('rw', sessionTables(db), async () => applyOps(db, batch, { settled }));
    }
    writtenBehind = false;
    for (const { userId, sessionId, row } of settled) known.set(userId, sessionId, row);
  }
  return { db, needlessRetries };
}

/** A random merge of the devices' ops that keeps each one's order, cut into random batches (`first` is the first batch). */
function causalBatches(first: Op[], devices: Op[][], choices: Iterator<number>): Op[][] {
  const batches: Op[][] = [[...first]];
  const next = devices.map(() => 0);
  for (let left = devices.flat().length; left > 0; left--) {
    const choice = choices.next().value as number;
    const open = devices.flatMap((ops, index) => (next[index]! < ops.length ? [index] : []));
    const device = open[choice % open.length]!;
    if (choice >= 3) batches.push([]);
    batches.at(-1)!.push(devices[device]![next[device]!++]!);
  }
  return batches;
}

/** One history (an export of it) as a device would hold it, and what differs in another device's copy of it. */
const historyArb = fc.record({
  messages: fc.array(fc.record({ status: fc.constantFrom('complete' as const, 'interrupted' as const), text: fc.constantFrom('p', 'q', 'r') }), { maxLength: 5 }),
  notes: fc.array(fc.constantFrom('x', 'y'), { maxLength: 3 }),
  journal: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 3 }),
  committed: fc.nat(),
  memory: fc.subarray(['a', 'b']),
  version: fc.integer({ min: 0, max: 2 }),
  // Another device's export of it: one message less (it had not got the last one), one a stream it
  // had only part of (copied as interrupted, with less text), one note more (anywhere among them).
  otherLacksLast: fc.boolean(),
  otherPartial: fc.option(fc.nat()),
  otherExtraNote: fc.option(fc.nat()),
  // The id had a life before, deleted after the history's first messages were written.
  deletedBefore: fc.boolean(),
});

/** The delete an earlier life of the import's id ended with, when `deletedBefore`: ordered among the history's messages. */
const EARLIER_DELETE = formatHlc({ wallMs: 1_699_999_990_000, counter: 2, clientId: 'del' });

type History = typeof historyArb extends fc.Arbitrary<infer T> ? T : never;

/** Two devices' exports of `history`: one whole, one as the other device held it. */
function exportsOf(history: History): [SessionExport, SessionExport] {
  const clock = createHlc({ clientId: 'src', wallClock: () => 1_699_999_990_000 });
  const messages = history.messages.map((m, index) => ({
    id: `src-m${index}`,
    // Some copied rows carry a #index suffix (a restored message, say).
    order: index % 2 === 0 ? clock.now() : subOrder(clock.now(), index),
    createdAt: index,
    status: m.status,
    message: { role: 'assistant' as const, content: `${m.text}${index}` },
  }));
  const data: SessionExport = {
    format: 'tabula.session',
    formatVersion: 1,
    userId: 'u',
    sessionId: 's',
    createdAt: 5,
    updatedAt: 9,
    version: history.version,
    forkOf: { userId: 'u', sessionId: 'source' },
    prefix: { systemPrompt: 'imported', grounding: [], schemaBlock: null },
    state: history.version === 0 ? { summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} } : { summary: 'src', tasks: history.version, plan: null, permissions: null, tools: [], context: {} },
    messages,
    journal: { entries: history.journal, watermark: history.journal.length === 0 ? 0 : history.committed % (history.journal.length + 1) },
    notes: history.notes.map((text) => ({ text, runId: null, scope: null, at: 1 })),
    memory: history.memory.map((key) => ({ scope: 'default', key, value: key })),
  };
  const partial = history.otherPartial === null || messages.length === 0 ? -1 : history.otherPartial % messages.length;
  const other: SessionExport = {
    ...data,
    messages: (history.otherLacksLast ? messages.slice(0, -1) : messages).map((m, index) =>
      index === partial ? { ...m, status: 'interrupted' as const, message: { ...m.message, content: 'part' } } : m,
    ),
    notes:
      history.otherExtraNote === null
        ? data.notes
        : [...data.notes.slice(0, history.otherExtraNote % (data.notes.length + 1)), { text: 'z', runId: null, scope: null, at: 2 }, ...data.notes.slice(history.otherExtraNote % (data.notes.length + 1))],
  };
  return [data, other];
}

/**
 * The ops `device` writes importing `data` (importInto, as importSession and fork run it), made by its
 * own clock, with the device's view of the session they make.
 */
async function importOps(device: string, skewMs: number, data: SessionExport, after: string): Promise<Prelude> {
  const clock = createHlc({ clientId: device, wallClock: () => 1_700_000_000_000 + skewMs });
  const ops: Op[] = [];
  let created = false;
  const make = (kind: OpKind, body: unknown, order = clock.now()): Op => {
    const op = { id: `${device}-import${ops.length}`, kind, userId: 'u', sessionId: 's', order, after, body } as Op;
    ops.push(op);
    return op;
  };
  // The session is new on the device, in the life after `after`.
  const row = { after } as SessionRow;
  const tx: Emitter = {
    row: () => (created ? row : undefined),
    existing: () => row,
    nextOrder: () => clock.now(),
    emit: async (kind, body) => {
      if (kind === 'session.create') created = true;
      return make(kind, body);
    },
    emitAppends: async (bodies, orders) => bodies.map((body, index) => make('message.append', body, orders?.[index]) as AppendOp),
  };
  await importInto(tx, data);
  const saved = ops.find((op) => op.kind === 'state.save');
  const placed = ops.flatMap((op) => (op.kind === 'message.append' ? [{ id: op.body.id, order: op.body.order ?? op.order }] : []));
  return { ops, messages: placed, checkpoints: [], version: data.version, base: saved?.order ?? '', after };
}

describe('applyOps convergence (property)', () => {
  it('replicas that receive three devices\' ops in any causal order end equal to in-order application', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ sorted, batches }) => {
        const expected = await contents(await replicaOf([sorted]));
        expect(await contents(await replicaOf(batches))).toEqual(expected);
      }),
      fcParams(60),
    );
  }, 240_000);

  it('two devices that import one history into one id, each from its own copy, and write on, end equal on every replica, the history once', async () => {
    await fc.assert(
      fc.asyncProperty(
        historyArb,
        fc.array(fc.array(actionArb, { maxLength: 12 }), { minLength: 2, maxLength: 2 }),
        fc.array(fc.integer({ min: -3, max: 3 }), { minLength: 2, maxLength: 2 }),
        fc.infiniteStream(fc.integer({ min: 0, max: 5 })),
        async (history, actions, skews, choices) => {
          const exports = exportsOf(history);
          const devices = await Promise.all(
            ['a', 'b'].map(async (device, index) => {
              const imported = await importOps(device, skews[index]!, exports[index]!, history.deletedBefore ? EARLIER_DELETE : '');
              return [...imported.ops, ...deviceOps(device, skews[index]!, actions[index]!, true, imported)];
            }),
          );
          const sorted = devices.flat().sort((x, y) => (x.order < y.order ? -1 : 1));
          // Every op is one the server accepts.
          for (const op of sorted) expect(() => parseOp(JSON.parse(JSON.stringify(op)))).not.toThrow();
          const inOrder = await replicaOf([sorted]);
          // Every row sorts after the delete its life began after, as an op of the life does: replication/seed.ts
          // queues rows as ops at their own order keys.
          const life = (await inOrder.sessions.get(['u', 's']))?.after;
          if (life !== undefined) {
            for (const table of [inOrder.messages, inOrder.notes, inOrder.journal] as const) {
              for (const row of await (table as typeof inOrder.notes).toArray()) expect(row.order > life, `${table.name} row at ${row.order}`).toBe(true);
            }
          }
          // The history is there once: no note or journal entry of it twice (each copy had it at most once per occurrence).
          const occurrences = (values: unknown[]) => values.reduce<Map<string, number>>((counts, value) => counts.set(JSON.stringify(value), (counts.get(JSON.stringify(value)) ?? 0) + 1), new Map());
          const most = (lists: unknown[][]) => {
            const out = new Map<string, number>();
            for (const list of lists) for (const [value, count] of occurrences(list)) out.set(value, Math.max(out.get(value) ?? 0, count));
            return out;
          };
          const notes = occurrences((await inOrder.notes.toArray()).map((n) => n.text));
          for (const [text, count] of most(exports.map((e) => e.notes.map((n) => n.text)))) expect(notes.get(text) ?? 0).toBeLessThanOrEqual(count);
          const entries = occurrences((await inOrder.journal.toArray()).map((j) => j.entry));
          for (const [entry, count] of most(exports.map((e) => e.journal.entries))) expect(entries.get(entry) ?? 0).toBeLessThanOrEqual(count);
          const expected = await contents(inOrder);
          expect(await contents(await replicaOf(causalBatches([], devices, choices[Symbol.iterator]())))).toEqual(expected);
        },
      ),
      fcParams(60),
    );
  }, 240_000);

  // The sync leader builds pulled pages on the session rows it knows. A known row is a guess: one that
  // another tab made stale must never be the base of what lands, and one nobody changed must hold (or
  // every page would be applied twice).
  it('a replica building on known session rows, with another tab writing behind its back, ends the same; an unchanged known row always holds', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, fc.infiniteStream(fc.boolean()), async ({ sorted, batches }, flips) => {
        const picks = flips[Symbol.iterator]();
        const otherTab = batches.map((_, index) => index > 0 && (picks.next().value as boolean));
        const expected = await contents(await replicaOf([sorted]));
        const { db, needlessRetries } = await replicaWithKnownRows(batches, otherTab);
        expect(await contents(db)).toEqual(expected);
        expect(needlessRetries).toBe(0);
      }),
      fcParams(60),
    );
  }, 240_000);
});
