/**
 * What the one write path reports, as sync would see it (property): three
 * devices write to one session through its rules (each write built on the
 * device's own row, as the session handle builds it), push their ops to
 * one log in the order they made them and pull the others' ops from it in
 * log order, at random points. Two reports must be exact:
 * - every save that ends replaced by one not built on it is reported to a
 *   device: the one that made it, or the one that made a save built on it
 *   that was itself replaced so (whatever the versions);
 * - a delete applied by a pull names exactly the messages, memory keys,
 *   notes and state of the life it ends whose op its deleter had not
 *   applied when it deleted (work made offline, concurrently).
 * Seeded: the seed is printed; TABULA_SEED=<n> replays it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createHlc, type HybridLogicalClock, type Op, type OpBody, type OpKind } from '../../../../src/core/index.js';
import { hlcOf } from '../../../../src/core/hlc.js';
import { applyOps, deleteBody, type DroppedWork, type SaveConflict } from '../../../../src/store/apply/index.js';
import { createDb, sessionRange, sessionTables, type TabulaDb } from '../../../../src/store/db/schema.js';
import { tombstoneKey } from '../../../../src/store/db/keys.js';
import { type SessionRow } from '../../../../src/store/db/rows.js';
import { fcParams } from '../../seed.js';
import { uniqueName } from '../helpers.js';

const USER = 'u';
const SESSION = 's';

type Step =
  | { kind: 'append' | 'note' | 'save' | 'checkpoint' | 'restore' | 'delete' | 'create'; device: number }
  | { kind: 'memory'; device: number; key: 'a' | 'b'; remove: boolean }
  | { kind: 'push'; device: number }
  | { kind: 'pull'; device: number; count: number }
  | { kind: 'tick'; device: number; ms: number };

const deviceArb = fc.integer({ min: 0, max: 2 });
const stepArb = (lives: boolean): fc.Arbitrary<Step> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('append' as const), device: deviceArb }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('memory' as const), device: deviceArb, key: fc.constantFrom('a' as const, 'b' as const), remove: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('note' as const), device: deviceArb }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('save' as const), device: deviceArb }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('checkpoint' as const), device: deviceArb }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('restore' as const), device: deviceArb }) },
    { weight: lives ? 1 : 0, arbitrary: fc.record({ kind: fc.constant('delete' as const), device: deviceArb }) },
    { weight: lives ? 1 : 0, arbitrary: fc.record({ kind: fc.constant('create' as const), device: deviceArb }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('push' as const), device: deviceArb }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('pull' as const), device: deviceArb, count: fc.integer({ min: 1, max: 6 }) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), device: deviceArb, ms: fc.integer({ min: 1, max: 4 }) }) },
  );

interface Device {
  readonly index: number;
  readonly db: TabulaDb;
  readonly clock: HybridLogicalClock;
  readonly clockId: string;
  wall: number;
  /** Ops made here and not pushed yet, in the order made. */
  pending: Op[];
  /** How far into the log this device has pulled. */
  cursor: number;
  /** Ids of every op applied here (made here or pulled). */
  readonly applied: Set<string>;
  /** Conflicts heard (those whose lost save was made here, as the sync client filters them). */
  readonly heard: SaveConflict[];
  seq: number;
}

interface World {
  readonly devices: Device[];
  readonly log: Op[];
  /** Every op, by its order key (unique per op). */
  readonly byOrder: Map<string, Op>;
  /** For each delete, the ids of the ops its device had applied when it deleted. */
  readonly seenAtDelete: Map<string, Set<string>>;
  /** Mismatches between the dropped work a pull reported and what it should have. */
  readonly droppedMismatches: unknown[];
  /** How many pulled deletes named something (to see that the property exercised the report). */
  named: number;
  stamp: number;
}

const rowOf = (db: TabulaDb) => db.sessions.get([USER, SESSION]);
const apply = (db: TabulaDb, ops: Op[], options: Parameters<typeof applyOps>[2] = {}) =>
  db.transaction('rw', sessionTables(db), async () => applyOps(db, ops, options));

async function tombstoneOf(db: TabulaDb, row: SessionRow | undefined): Promise<string> {
  if (row?.after !== undefined) return row.after;
  const stored = await db.meta.get(tombstoneKey(USER, SESSION));
  return typeof stored?.value === 'string' ? stored.value : '';
}

/** Makes an op of device `d` on its own row, the way the session handle does, and applies it here. */
async function write<K extends OpKind>(world: World, d: Device, kind: K, body: (row: SessionRow | undefined) => OpBody<K>): Promise<Op> {
  const row = await rowOf(d.db);
  const floor = row?.lastOrder ?? (await tombstoneOf(d.db, row));
  let order = d.clock.now();
  if (floor && order <= floor) order = d.clock.receive(hlcOf(floor));
  const after = row ? row.after : await tombstoneOf(d.db, row);
  const op = { id: `${d.index}-${++d.seq}`, kind, userId: USER, sessionId: SESSION, order, ...(after === undefined ? {} : { after }), body: body(row) } as Op;
  await apply(d.db, [op]);
  d.applied.add(op.id);
  d.pending.push(op);
  world.byOrder.set(op.order, op);
  return op;
}

/** The work `d` holds of its current life that a delete by a device that had applied `seen` drops, computed from the ops themselves. */
async function expectedDropped(world: World, d: Device, seen: Set<string>): Promise<Omit<DroppedWork, 'userId' | 'sessionId'> | undefined> {
  const row = (await rowOf(d.db)) as SessionRow;
  const unseen = (order: string) => !seen.has((world.byOrder.get(hlcOf(order)) as Op).id);
  const range = sessionRange(USER, SESSION);
  const messages = await d.db.messages.where('[userId+sessionId+order]').between(...range).toArray();
  const memory = await d.db.memory.where('[userId+sessionId+scope]').between(...range).toArray();
  const notes = await d.db.notes.where('[userId+sessionId+order]').between(...range).toArray();
  const work = {
    messages: messages.filter((m) => unseen(m.order)).map((m) => m.id),
    memory: memory.filter((m) => !m.deleted && unseen(m.order)).map(({ scope, key }) => ({ scope, key })),
    notes: notes.filter((n) => unseen(n.order)).map((n) => n.id),
    state: row.version > 0 && unseen(row.versionOrder as string),
  };
  return work.messages.length + work.memory.length + work.notes.length > 0 || work.state ? work : undefined;
}

/** Pulls up to `count` ops of the others from the log, as one page (a delete on its own, to know what it should name). */
async function pull(world: World, d: Device, count: number): Promise<void> {
  const page = world.log.slice(d.cursor, d.cursor + count).filter((op) => !d.applied.has(op.id));
  d.cursor = Math.min(world.log.length, d.cursor + count);
  const runs: Op[][] = [];
  for (const op of page) {
    if (op.kind === 'session.delete' || runs.length === 0 || runs.at(-1)?.[0]?.kind === 'session.delete') runs.push([op]);
    else runs.at(-1)?.push(op);
  }
  for (const ops of runs) {
    const [first] = ops as [Op];
    let expected: Awaited<ReturnType<typeof expectedDropped>>;
    if (first.kind === 'session.delete') {
      const row = await rowOf(d.db);
      const ends = row !== undefined && first.order > (await tombstoneOf(d.db, row));
      expected = ends ? await expectedDropped(world, d, world.seenAtDelete.get(first.id) as Set<string>) : undefined;
    }
    const conflicts: SaveConflict[] = [];
    const dropped: DroppedWork[] = [];
    await apply(d.db, ops, { conflicts, dropped });
    for (const op of ops) d.applied.add(op.id);
    // As the sync client does: only the device whose save lost hears of it.
    d.heard.push(...conflicts.filter((c) => hlcOf(c.lost.order).endsWith(`.${d.clockId}`)));
    if (first.kind !== 'session.delete') continue;
    const reported = dropped.map(({ userId: _u, sessionId: _s, ...work }) => work);
    if (reported.length > 0) world.named += 1;
    if (JSON.stringify(reported) !== JSON.stringify(expected ? [expected] : [])) world.droppedMismatches.push({ device: d.index, delete: first, reported, expected });
  }
}

const uniqueState = (world: World, d: Device) => ({ summary: null, tasks: `${d.index}:${++world.stamp}`, plan: null, permissions: null, tools: [], context: {} });

async function step(world: World, s: Step): Promise<void> {
  const d = world.devices[s.device] as Device;
  const row = await rowOf(d.db);
  switch (s.kind) {
    case 'tick':
      d.wall += s.ms;
      return;
    case 'push':
      world.log.push(...d.pending);
      d.pending = [];
      return;
    case 'pull':
      await pull(world, d, s.count);
      return;
    case 'create':
      if (!row) await write(world, d, 'session.create', () => ({ createdAt: 1, forkOf: null }));
      return;
    default:
  }
  if (!row) return;
  switch (s.kind) {
    case 'append':
      await write(world, d, 'message.append', () => ({ id: `m${d.index}.${d.seq}`, createdAt: 1, status: 'complete', message: { role: 'user', content: `${d.index}` } }));
      return;
    case 'memory':
      if (s.remove) await write(world, d, 'memory.delete', () => ({ scope: 'default', key: s.key }));
      else await write(world, d, 'memory.set', () => ({ scope: 'default', key: s.key, value: d.seq }));
      return;
    case 'note':
      await write(world, d, 'note.add', () => ({ text: `${d.index}`, runId: null, scope: null, at: 1 }));
      return;
    case 'save':
      await write(world, d, 'state.save', (r) => ({ version: (r as SessionRow).version + 1, patch: uniqueState(world, d), base: (r as SessionRow).versionOrder ?? '' }));
      return;
    case 'checkpoint': {
      const messages = await d.db.messages.where('[userId+sessionId+order]').between(...sessionRange(USER, SESSION)).toArray();
      await write(world, d, 'checkpoint.create', (r) => ({
        id: `cp${d.index}.${d.seq}`,
        label: null,
        at: 1,
        snapshot: { prefix: (r as SessionRow).prefix, state: uniqueState(world, d), messages: messages.map(({ id, order, createdAt, status, message }) => ({ id, order, createdAt, status, message })) },
      }));
      return;
    }
    case 'restore': {
      const [checkpoint] = await d.db.checkpoints.where('[userId+sessionId]').equals([USER, SESSION]).toArray();
      if (checkpoint) await write(world, d, 'checkpoint.restore', (r) => ({ id: checkpoint.id, version: (r as SessionRow).version + 1, base: (r as SessionRow).versionOrder ?? '' }));
      return;
    }
    case 'delete': {
      const seen = new Set(d.applied);
      const deleted = await write(world, d, 'session.delete', (r) => deleteBody(r));
      world.seenAtDelete.set(deleted.id, seen);
      return;
    }
  }
}

async function run(steps: Step[]): Promise<World> {
  const devices = [0, 1, 2].map((index): Device => {
    const device: Device = {
      index,
      db: createDb(uniqueName(`reports-${index}`)),
      clockId: `dev${index}`,
      wall: 1_700_000_000_000 + index,
      clock: undefined as unknown as HybridLogicalClock,
      pending: [],
      cursor: 0,
      applied: new Set(),
      heard: [],
      seq: 0,
    };
    Object.assign(device, { clock: createHlc({ clientId: device.clockId, wallClock: () => device.wall }) });
    return device;
  });
  const world: World = { devices, log: [], byOrder: new Map(), seenAtDelete: new Map(), droppedMismatches: [], named: 0, stamp: 0 };
  // The session and a first save exist on every device before the steps.
  const first = devices[0] as Device;
  await write(world, first, 'session.create', () => ({ createdAt: 1, forkOf: null }));
  await write(world, first, 'state.save', () => ({ version: 1, patch: uniqueState(world, first), base: '' }));
  world.log.push(...first.pending);
  first.pending = [];
  for (const device of devices.slice(1)) await pull(world, device, world.log.length);
  for (const s of steps) await step(world, s);
  // Everything reaches everyone.
  for (const device of devices) await step(world, { kind: 'push', device: device.index });
  for (const device of devices) await pull(world, device, world.log.length);
  return world;
}

function close(world: World): void {
  for (const device of world.devices) device.db.close();
}

describe('applyOps reports (property)', () => {
  it('every save replaced by one not built on it is reported to the device that made it or to one that built on it, whatever the versions', async () => {
    let reported = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb(false), { minLength: 10, maxLength: 60 }), async (steps) => {
        const world = await run(steps);
        try {
          const rows = await Promise.all(world.devices.map((d) => rowOf(d.db)));
          const winner = world.byOrder.get(rows[0]?.versionOrder as string) as Op;
          for (const row of rows) expect(row?.versionOrder).toBe(winner.order);
          const saves = [...world.byOrder.values()].filter((op): op is Op & { kind: 'state.save' | 'checkpoint.restore' } => op.kind === 'state.save' || op.kind === 'checkpoint.restore');
          const baseOf = (op: Op & { kind: 'state.save' | 'checkpoint.restore' }) => op.body.base ?? '';
          const ancestors = new Set<string>();
          for (let at: Op | undefined = winner; at; at = world.byOrder.get(baseOf(at as Op & { kind: 'state.save' }))) ancestors.add(at.order);
          const heardBy = new Map<string, number>();
          for (const device of world.devices) {
            for (const conflict of device.heard) {
              // A conflict names a save of the device that heard it, replaced by one not built on it.
              expect(hlcOf(conflict.lost.order).endsWith(`.${device.clockId}`)).toBe(true);
              expect(baseOf(world.byOrder.get(conflict.won.order) as Op & { kind: 'state.save' })).not.toBe(conflict.lost.order);
              heardBy.set(conflict.lost.order, (heardBy.get(conflict.lost.order) ?? 0) + 1);
            }
          }
          // Each replaced save is heard of once at most, by its own device.
          for (const count of heardBy.values()) expect(count).toBe(1);
          reported += heardBy.size;
          // Saves replaced for good: each one, or one built on it, replaced in turn, was heard of; or it was
          // replaced by the very same state (two restores of one checkpoint), which loses nothing.
          const stateOf = (op: Op & { kind: 'state.save' | 'checkpoint.restore' }) => {
            if (op.kind === 'state.save') return JSON.stringify(op.body.patch);
            const checkpoint = [...world.byOrder.values()].find((other) => other.kind === 'checkpoint.create' && other.body.id === op.body.id);
            return JSON.stringify(checkpoint?.kind === 'checkpoint.create' ? checkpoint.body.snapshot.state : null);
          };
          const builtOn = (op: Op & { kind: 'state.save' | 'checkpoint.restore' }) => saves.filter((other) => baseOf(other) === op.order);
          const sameStateElsewhere = (op: Op & { kind: 'state.save' | 'checkpoint.restore' }) =>
            saves.some((other) => other !== op && baseOf(other) !== op.order && stateOf(other) === stateOf(op));
          const heardOfOrAbove = (op: Op & { kind: 'state.save' | 'checkpoint.restore' }): boolean =>
            heardBy.has(op.order) || sameStateElsewhere(op) || builtOn(op).some(heardOfOrAbove);
          for (const save of saves) {
            if (save.kind !== 'state.save' || ancestors.has(save.order)) continue;
            expect(heardOfOrAbove(save), `save ${save.order} (${JSON.stringify(save.body.patch.tasks)}) was replaced and nobody heard`).toBe(true);
          }
        } finally {
          close(world);
        }
      }),
      fcParams(100),
    );
    // The property saw conflicts at all (random schedules make them often).
    console.info(`[reports] conflicts heard: ${reported}`);
    expect(reported).toBeGreaterThan(0);
  }, 240_000);

  it('a pulled delete names exactly the work of the life it ends that its deleter had not applied', async () => {
    let named = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb(true), { minLength: 10, maxLength: 60 }), async (steps) => {
        const world = await run(steps);
        try {
          expect(world.droppedMismatches).toEqual([]);
          named += world.named;
        } finally {
          close(world);
        }
      }),
      fcParams(100),
    );
    console.info(`[reports] deletes that named work: ${named}`);
    expect(named).toBeGreaterThan(0);
  }, 240_000);
});
