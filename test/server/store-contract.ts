/**
 * `runServerStoreTests(setup)`: the one contract suite every `ServerStore`
 * passes (the guarantees listed in src/server/store.ts). Each test asks the
 * setup for a fresh store and uses user ids no other test uses.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makeOp, type Op } from '../../src/core/index.js';
import type { ServerStore, StorePokeItems, StorePushItem, StoreOptions } from '../../src/server/index.js';
import { POKE_ITEMS_MAX_BYTES, POKE_MAX_ITEMS } from '../../src/server/store.js';
import { EPOCH } from '../../src/sync/protocol.js';
import { boardOf, boardWriter, decodePulled, noteOp, orderKey, uniqueUser, type DecodedItem } from './helpers.js';

/** A pull's byte budget that never binds. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/** What a store implementation provides to the suite. */
export interface StoreSetup {
  /** A store over fresh or shared storage; `reopen` closes it and opens the same storage again. */
  readonly create: (options?: StoreOptions) => Promise<{ store: ServerStore; reopen: () => Promise<ServerStore> }>;
  /** A second store on the same storage (another server instance), when the implementation supports several. */
  readonly peer?: () => Promise<ServerStore>;
}

function ops(userId: string, from: number, to: number, sessionId = 's1'): StorePushItem[] {
  const items: StorePushItem[] = [];
  for (let seq = from; seq <= to; seq++) items.push({ seq, op: noteOp(userId, sessionId, seq) });
  return items;
}

/** A `session.delete` of `sessionId` at `order`: it begins the session life whose `after` is `order`. */
function deleteOp(userId: string, sessionId: string, order: string): Op {
  return makeOp('session.delete', { id: randomUUID(), userId, sessionId, order, body: {} });
}

/** The op of a decoded item; null for a board update. */
function opOf(item: DecodedItem): Op | null {
  return 'op' in item ? item.op : null;
}

async function pullAll(store: ServerStore, userId: string, limit = 1000) {
  const items = [];
  let after = 0;
  for (;;) {
    const page = await store.pull(userId, after, limit, UNBOUNDED);
    items.push(...page.items.map(decodePulled));
    if (page.items.length > 0) after = page.items[page.items.length - 1]!.position;
    if (!page.more) return items;
  }
}

/** Subscribes (resolving once pokes are delivered); `poked` resolves with the first poke's head. */
async function watch(store: ServerStore, userId: string): Promise<{ poked: Promise<number>; off: () => void }> {
  let resolvePoke: (head: number) => void = () => {};
  const poked = new Promise<number>((resolve) => {
    resolvePoke = resolve;
  });
  const off = await store.subscribe(userId, (head) => resolvePoke(head));
  return { poked, off };
}

/** Every poke `store` makes for `userId`, with the items it carried (decoded), as they come. */
async function pokesOf(store: ServerStore, userId: string): Promise<{ pokes: { head: number; appended?: { after: number; items: DecodedItem[] } }[]; off: () => void }> {
  const pokes: { head: number; appended?: { after: number; items: DecodedItem[] } }[] = [];
  const off = await store.subscribe(userId, (head: number, appended?: StorePokeItems) =>
    pokes.push(appended ? { head, appended: { after: appended.after, items: appended.items.map(decodePulled) } } : { head }),
  );
  return { pokes, off };
}

/** What a pull from `after` returns now, decoded: a poke's items must equal it. */
async function pulledAfter(store: ServerStore, userId: string, after: number): Promise<DecodedItem[]> {
  return (await store.pull(userId, after, 1000, UNBOUNDED)).items.map(decodePulled);
}

export function runServerStoreTests(name: string, setup: StoreSetup): void {
  describe(`ServerStore contract: ${name}`, () => {
    it('stores a push and pulls it back in order, with the pushing client', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const items = ops(alice, 1, 5);
      const result = await store.push(alice, 'laptop', items);
      expect(result).toEqual({ status: 'applied', lastSeq: 5, appended: 5, head: 5 });
      const pulled = await pullAll(store, alice);
      expect(pulled.map(opOf)).toEqual(items.map((item) => ('op' in item ? item.op : null)));
      expect(pulled.every((item) => item.clientId === 'laptop')).toBe(true);
      expect(pulled.map((item) => item.position)).toEqual([1, 2, 3, 4, 5]);
      expect(await store.head(alice)).toBe(5);
      expect(await store.lastSeq(alice, 'laptop')).toBe(5);
      await store.close();
    });

    it('ignores retried seqs and appends only the new tail of an overlapping push', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const first = ops(alice, 1, 3);
      await store.push(alice, 'c', first);
      expect(await store.push(alice, 'c', first)).toEqual({ status: 'applied', lastSeq: 3, appended: 0, head: 3 });
      const overlap = [...first.slice(1), ...ops(alice, 4, 5)];
      expect(await store.push(alice, 'c', overlap)).toMatchObject({ status: 'applied', lastSeq: 5, appended: 2 });
      const pulled = await pullAll(store, alice);
      expect(pulled).toHaveLength(5);
      expect(new Set(pulled.map((item) => opOf(item)?.id)).size).toBe(5);
      await store.close();
    });

    it('refuses a gap, at the start or inside a push, and stores nothing of it', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      expect(await store.push(alice, 'c', ops(alice, 2, 3))).toEqual({ status: 'gap', lastSeq: 0 });
      await store.push(alice, 'c', ops(alice, 1, 1));
      const holey = [...ops(alice, 2, 3), ...ops(alice, 5, 5)];
      expect(await store.push(alice, 'c', holey)).toEqual({ status: 'gap', lastSeq: 1 });
      expect(await pullAll(store, alice)).toHaveLength(1);
      expect(await store.lastSeq(alice, 'c')).toBe(1);
      expect(await store.head(alice)).toBe(1);
      await store.close();
    });

    it('keeps users apart: same session id, same client id, separate logs and seqs', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const bob = uniqueUser('bob');
      await store.push(alice, 'c', ops(alice, 1, 3, 'shared'));
      await store.push(bob, 'c', ops(bob, 1, 1, 'shared'));
      const alices = await pullAll(store, alice);
      const bobs = await pullAll(store, bob);
      expect(alices.map((item) => opOf(item)?.userId)).toEqual([alice, alice, alice]);
      expect(bobs.map((item) => opOf(item)?.userId)).toEqual([bob]);
      expect(await store.lastSeq(bob, 'c')).toBe(1);
      expect(await store.head(bob)).toBe(1);
      await store.close();
    });

    it('pages: every item exactly once, `more` false only at the end', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      await store.push(alice, 'c', ops(alice, 1, 25));
      const first = await store.pull(alice, 0, 10, UNBOUNDED);
      expect(first.items).toHaveLength(10);
      expect(first.more).toBe(true);
      const all = await pullAll(store, alice, 10);
      expect(all.map((item) => item.position)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
      const last = await store.pull(alice, 20, 5, UNBOUNDED);
      expect(last.items).toHaveLength(5);
      expect(last.more).toBe(false);
      expect(await store.pull(alice, 25, 10, UNBOUNDED)).toEqual({ items: [], more: false });
      await store.close();
    });

    it('keeps board updates byte for byte', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const board = boardWriter();
      const update = board.write('plan', 'ship it');
      await store.push(alice, 'c', [{ seq: 1, board: { sessionId: 's1', update } }]);
      const [item] = await pullAll(store, alice);
      expect(item && 'board' in item ? item.board : null).toEqual({ sessionId: 's1', update });
      await store.close();
    });

    it('pokes a user’s subscribers after a commit that appended, not other users, not for retries', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const bob = uniqueUser('bob');
      const bobPokes: number[] = [];
      const offBob = await store.subscribe(bob, (head) => bobPokes.push(head));
      const first = await watch(store, alice);
      const items = ops(alice, 1, 2);
      await store.push(alice, 'c', items);
      expect(await first.poked).toBe(2);
      // The poke comes after the commit: a pull at that moment sees the items.
      expect(await pullAll(store, alice)).toHaveLength(2);
      first.off();
      const alicePokes: number[] = [];
      const offAlice = await store.subscribe(alice, (h) => alicePokes.push(h));
      await store.push(alice, 'c', items);
      // A poke, if one were sent, travels with the next one: push something for bob and wait for it.
      const bobWatch = await watch(store, bob);
      await store.push(bob, 'c', ops(bob, 1, 1));
      await bobWatch.poked;
      bobWatch.off();
      await store.push(alice, 'c', ops(alice, 3, 3));
      await expect.poll(() => alicePokes).toEqual([3]);
      expect(bobPokes).toEqual([1]);
      offAlice();
      offBob();
      await store.close();
    });

    it('a poke carries the items of a small push, exactly what a pull from the old head returns, to that user only', async () => {
      const { store } = await setup.create({ compactBoardAfter: 2 });
      const alice = uniqueUser('alice');
      const bob = uniqueUser('bob');
      const a = await pokesOf(store, alice);
      const b = await pokesOf(store, bob);
      await store.push(alice, 'laptop', ops(alice, 1, 3));
      await expect.poll(() => a.pokes.length).toBe(1);
      expect(a.pokes[0]).toEqual({ head: 3, appended: { after: 0, items: await pulledAfter(store, alice, 0) } });
      expect(a.pokes[0]!.appended!.items.map((item) => item.position)).toEqual([1, 2, 3]);
      // Board updates, compacted as they land: the poke holds what a pull gets after compaction.
      const board = boardWriter();
      for (let seq = 4; seq <= 6; seq++) {
        await store.push(alice, 'laptop', [{ seq, board: { sessionId: 's1', update: board.write(`k${seq}`, 'v') } }]);
        await expect.poll(() => a.pokes.length).toBe(seq - 2);
        expect(a.pokes[seq - 3]).toEqual({ head: seq, appended: { after: seq - 1, items: await pulledAfter(store, alice, seq - 1) } });
      }
      expect(a.pokes[3]!.appended!.items).toEqual([expect.objectContaining({ position: 6, clientId: null })]);
      // A retry appends nothing and pokes nobody; bob's push pokes bob with bob's items only.
      await store.push(alice, 'laptop', ops(alice, 1, 3));
      await store.push(bob, 'phone', ops(bob, 1, 1));
      await expect.poll(() => b.pokes.length).toBe(1);
      expect(b.pokes[0]!.appended!.items.map((item) => ('op' in item ? item.op.userId : null))).toEqual([bob]);
      expect(a.pokes).toHaveLength(4);
      expect(a.pokes.flatMap((poke) => poke.appended?.items ?? []).every((item) => !('op' in item) || item.op.userId === alice)).toBe(true);
      a.off();
      b.off();
      await store.close();
    });

    it("a user's pokes arrive in push order, each carrying items that continue the one before", async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const { pokes, off } = await pokesOf(store, alice);
      // Pushes answered one after another, as a client sends them: their pokes must not overtake each other.
      for (let seq = 1; seq <= 30; seq++) await store.push(alice, 'c', ops(alice, seq, seq));
      await expect.poll(() => pokes.at(-1)?.head).toBe(30);
      // A store may announce pushes that land close together in one poke; never out of order, never a hole.
      const heads = pokes.map((poke) => poke.head);
      expect(heads).toEqual([...heads].sort((a, b) => a - b));
      expect(new Set(heads).size).toBe(heads.length);
      pokes.forEach((poke, i) => {
        const before = i === 0 ? 0 : pokes[i - 1]!.head;
        // The poke of one push carries its item; one announcing several pushes at once (a loaded machine
        // lets them pile up) may be too large to carry them, but what it carries continues the last poke.
        if (poke.head - before === 1) expect(poke.appended, `the poke of push ${poke.head}`).toBeDefined();
        if (poke.appended) expect(poke.appended.items.map((item) => item.position)).toEqual(Array.from({ length: poke.head - before }, (_, k) => before + k + 1));
        if (poke.appended) expect(poke.appended.after).toBe(before);
      });
      off();
      await store.close();
    });

    it('a push too large for a poke pokes without its items', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const { pokes, off } = await pokesOf(store, alice);
      // Too many items, then few items of too many bytes: both heads are poked, neither push's items travel.
      // Each push waits for its poke, so no store can announce two of them in one.
      await store.push(alice, 'c', ops(alice, 1, POKE_MAX_ITEMS + 1));
      await expect.poll(() => pokes.at(-1)?.head).toBe(65);
      const long = Array.from({ length: 20 }, (_, i) => ({ seq: 66 + i, op: noteOp(alice, 's1', 66 + i, 'x'.repeat(500)) }));
      expect(20 * 500).toBeGreaterThan(POKE_ITEMS_MAX_BYTES);
      await store.push(alice, 'c', long);
      await expect.poll(() => pokes.at(-1)?.head).toBe(85);
      await store.push(alice, 'c', ops(alice, 86, 86));
      await expect.poll(() => pokes.length).toBe(3);
      expect(pokes.slice(0, 2)).toEqual([{ head: 65 }, { head: 85 }]);
      expect(pokes[2]).toEqual({ head: 86, appended: { after: 85, items: await pulledAfter(store, alice, 85) } });
      off();
      await store.close();
    });

    it('lands concurrent pushes of two clients of one user, each once, positions without holes', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const a = Array.from({ length: 10 }, (_, i) => ops(alice, i * 5 + 1, i * 5 + 5));
      const b = Array.from({ length: 10 }, (_, i) => ops(alice, i * 5 + 1, i * 5 + 5, 's2'));
      // Each client sends its pushes one after another (as a client does); b also retries each at once.
      const run = async (clientId: string, batches: StorePushItem[][], retry: boolean) => {
        const results = [];
        for (const batch of batches) results.push(...(await Promise.all([store.push(alice, clientId, batch), ...(retry ? [store.push(alice, clientId, batch)] : [])])));
        return results;
      };
      const results = (await Promise.all([run('a', a, false), run('b', b, true)])).flat();
      expect(results.map((result) => result.status)).toEqual(Array(30).fill('applied'));
      const pulled = await pullAll(store, alice);
      expect(pulled).toHaveLength(100);
      expect(pulled.map((item) => item.position)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      expect(new Set(pulled.map((item) => opOf(item)?.id)).size).toBe(100);
      expect(await store.lastSeq(alice, 'a')).toBe(50);
      expect(await store.lastSeq(alice, 'b')).toBe(50);
      await store.close();
    });

    it('compacts a session’s board updates into one that holds them all, for readers at any cursor', async () => {
      const { store } = await setup.create({ compactBoardAfter: 4 });
      const alice = uniqueUser('alice');
      const board = boardWriter();
      const other = boardWriter();
      await store.push(alice, 'c', [{ seq: 1, board: { sessionId: 'other', update: other.write('x', '1') } }]);
      const updates = Array.from({ length: 10 }, (_, i) => board.write(`k${i}`, `v${i}`));
      for (let i = 0; i < 10; i++) await store.push(alice, 'c', [{ seq: i + 2, board: { sessionId: 's1', update: updates[i]! } }]);
      const pulled = await pullAll(store, alice);
      const s1 = pulled.filter((item) => 'board' in item && item.board.sessionId === 's1');
      expect(s1.length).toBeLessThanOrEqual(4);
      expect(s1.some((item) => item.clientId === null)).toBe(true);
      expect(boardOf(s1.map((item) => ('board' in item ? item.board.update : new Uint8Array())))).toEqual(board.doc.getMap('board').toJSON());
      // A reader that had the first 3 updates only (cursor at position 4) still gets the rest.
      const late = (await store.pull(alice, 4, 1000, UNBOUNDED)).items.map(decodePulled).filter((item) => 'board' in item && item.board.sessionId === 's1');
      expect(boardOf([...updates.slice(0, 3), ...late.map((item) => ('board' in item ? item.board.update : new Uint8Array()))])).toEqual(board.doc.getMap('board').toJSON());
      // Other sessions are left alone.
      expect(pulled.filter((item) => 'board' in item && item.board.sessionId === 'other')).toHaveLength(1);
      expect(await store.head(alice)).toBe(11);
      await store.close();
    });

    it('keeps a board update\'s session life, and compacts each life apart', async () => {
      const { store } = await setup.create({ compactBoardAfter: 4 });
      const alice = uniqueUser('alice');
      const first = boardWriter();
      const second = boardWriter();
      const life = '001700000000003.000000.a';
      await store.push(alice, 'e', [{ seq: 1, op: deleteOp(alice, 's1', life) }]);
      // Interleaved: a device that had not heard of the delete yet kept writing to the first life.
      let seq = 0;
      for (let i = 0; i < 6; i++) {
        await store.push(alice, 'c', [{ seq: ++seq, board: { sessionId: 's1', update: first.write(`old${i}`, 'x'), after: '' } }]);
        await store.push(alice, 'd', [{ seq, board: { sessionId: 's1', update: second.write(`new${i}`, 'y'), after: life } }]);
      }
      const boards = (await pullAll(store, alice)).flatMap((item) => ('board' in item ? [item.board] : []));
      // No update holds both lives' content: the newer life's updates hold exactly its own board.
      expect(boardOf(boards.filter((board) => board.after === life).map((board) => board.update))).toEqual(second.doc.getMap('board').toJSON());
      expect(boards.every((board) => board.after === life || board.after === '')).toBe(true);
      expect(boards.filter((board) => board.after === life).length).toBeLessThanOrEqual(4);
      await store.close();
    });

    it('a fresh pull after a delete, a re-create and more than compactBoardAfter updates holds nothing of the old life\'s board', async () => {
      const { store } = await setup.create({ compactBoardAfter: 4 });
      const alice = uniqueUser('alice');
      const old = boardWriter();
      const renewed = boardWriter();
      const life = '001700000000003.000000.a';
      let seq = 0;
      for (let i = 0; i < 6; i++) await store.push(alice, 'c', [{ seq: ++seq, board: { sessionId: 's1', update: old.write(`old${i}`, 'x'), after: '' } }]);
      await store.push(alice, 'c', [{ seq: ++seq, op: deleteOp(alice, 's1', life) }]);
      for (let i = 0; i < 6; i++) await store.push(alice, 'c', [{ seq: ++seq, board: { sessionId: 's1', update: renewed.write(`new${i}`, 'y'), after: life } }]);
      // A late update of the old life, pushed by a device that had not heard of the delete.
      await store.push(alice, 'd', [{ seq: 1, board: { sessionId: 's1', update: old.write('late', 'x'), after: '' } }]);
      const boards = (await pullAll(store, alice)).flatMap((item) => ('board' in item ? [item.board] : []));
      expect(boards.map((board) => board.after)).toEqual(boards.map(() => life));
      expect(boardOf(boards.map((board) => board.update))).toEqual(renewed.doc.getMap('board').toJSON());
      expect(await store.head(alice)).toBe(14);
      await store.close();
    });

    it('refuses a board push naming a life no delete began, whole: nothing stored, the board clients keep intact', async () => {
      const { store } = await setup.create({ compactBoardAfter: 4 });
      const alice = uniqueUser('alice');
      const board = boardWriter();
      await store.push(alice, 'c', [
        { seq: 1, op: noteOp(alice, 's1', 1) },
        { seq: 2, board: { sessionId: 's1', update: board.write('plan', 'ship'), after: '' } },
      ]);
      // A life "after" a delete far in the future, that no delete began: compaction would drop every real life for it.
      const forged = boardWriter();
      const refused = [
        { seq: 1, op: noteOp(alice, 's1', 1) },
        { seq: 3, op: noteOp(alice, 's1', 3) },
        { seq: 4, board: { sessionId: 's1', update: forged.write('plan', 'wipe'), after: '999999999999999.ffffff.z' } },
      ];
      expect(await store.push(alice, 'c', refused)).toEqual({ status: 'unknown-life', index: 2 });
      expect(await store.head(alice)).toBe(2);
      expect(await store.lastSeq(alice, 'c')).toBe(2);
      const pulled = await pullAll(store, alice);
      expect(pulled.map((item) => item.position)).toEqual([1, 2]);
      expect(boardOf(pulled.flatMap((item) => ('board' in item ? [item.board.update] : [])))).toEqual({ plan: 'ship' });
      // The client goes on from its lastSeq.
      expect(await store.push(alice, 'c', [{ seq: 3, board: { sessionId: 's1', update: board.write('more', 'x'), after: '' } }])).toMatchObject({ status: 'applied', head: 3 });
      await store.close();
    });

    it('a board may name a life a stored op or an earlier item of its push began; not a later item, another session\'s or another user\'s', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      const bob = uniqueUser('bob');
      const life = orderKey(50, 'dev');
      const board = boardWriter();
      let written = 0;
      const update = (): Uint8Array => board.write(`k${++written}`, 'v');
      // The delete after the board that names its life: refused.
      expect(
        await store.push(alice, 'c', [
          { seq: 1, board: { sessionId: 's1', update: update(), after: life } },
          { seq: 2, op: deleteOp(alice, 's1', life) },
        ]),
      ).toEqual({ status: 'unknown-life', index: 0 });
      // Bob's delete and a delete of another session begin no life of alice's s1.
      expect(await store.push(bob, 'c', [{ seq: 1, op: deleteOp(bob, 's1', life) }])).toMatchObject({ status: 'applied' });
      expect(await store.push(alice, 'c', [{ seq: 1, op: deleteOp(alice, 's2', life) }])).toMatchObject({ status: 'applied' });
      expect(await store.push(alice, 'c', [{ seq: 2, board: { sessionId: 's1', update: update(), after: life } }])).toEqual({ status: 'unknown-life', index: 0 });
      // The delete first, in the same push: stored, and from then on a stored delete begins the life.
      expect(
        await store.push(alice, 'c', [
          { seq: 2, op: deleteOp(alice, 's1', life) },
          { seq: 3, board: { sessionId: 's1', update: update(), after: life } },
        ]),
      ).toMatchObject({ status: 'applied', head: 3 });
      expect(await store.push(alice, 'd', [{ seq: 1, board: { sessionId: 's1', update: update(), after: life } }])).toMatchObject({ status: 'applied', head: 4 });
      // Bob's s1 got his own delete: his board of that life lands.
      expect(await store.push(bob, 'c', [{ seq: 2, board: { sessionId: 's1', update: update(), after: life } }])).toMatchObject({ status: 'applied', head: 2 });
      // An op written in a life proves its delete (a device that never pushed the delete pushes the new life's ops).
      const later = orderKey(60, 'dev');
      expect(await store.push(alice, 'd', [{ seq: 2, board: { sessionId: 's1', update: update(), after: later } }])).toEqual({ status: 'unknown-life', index: 0 });
      expect(
        await store.push(alice, 'd', [
          { seq: 2, op: { ...noteOp(alice, 's1', 61), after: later } },
          { seq: 3, board: { sessionId: 's1', update: update(), after: later } },
        ]),
      ).toMatchObject({ status: 'applied', head: 6 });
      // A first life, and a board from before lives were named, need no delete.
      expect(await store.push(alice, 'd', [{ seq: 4, board: { sessionId: 's3', update: update(), after: '' } }, { seq: 5, board: { sessionId: 's4', update: update() } }])).toMatchObject({
        status: 'applied',
        head: 8,
      });
      await store.close();
    });

    it('drops older lives in code-unit order of their keys, whatever the storage\'s collation', async () => {
      const { store } = await setup.create({ compactBoardAfter: 100 });
      const alice = uniqueUser('alice');
      // Code units: 'B' (0x42) < '_' (0x5f) < 'a' (0x61), so the newest life is the one after `...a`.
      // A natural-language collation puts lower case first and punctuation before letters: `...B` newest.
      const lives = ['001700000000003.000000.B', '001700000000003.000000._', '001700000000003.000000.a'];
      let seq = 0;
      for (const life of lives) await store.push(alice, 'c', [{ seq: ++seq, op: deleteOp(alice, 's1', life) }]);
      const newest = boardWriter();
      for (let i = 0; i < 3; i++) await store.push(alice, 'c', [{ seq: ++seq, board: { sessionId: 's1', update: newest.write(`k${i}`, 'new'), after: lives[2]! } }]);
      // Late updates of the older lives, from devices that had not heard of the later deletes.
      for (const life of lives.slice(0, 2)) await store.push(alice, 'c', [{ seq: ++seq, board: { sessionId: 's1', update: boardWriter().write('old', life), after: life } }]);
      const boards = (await pullAll(store, alice)).flatMap((item) => ('board' in item ? [item.board] : []));
      expect(boards.map((board) => board.after)).toEqual([lives[2], lives[2], lives[2]]);
      expect(boardOf(boards.map((board) => board.update))).toEqual(newest.doc.getMap('board').toJSON());
      await store.close();
    });

    it('bounds a page in bytes: the first item always, then none from the one that would pass maxBytes; `more` says the rest', async () => {
      const { store } = await setup.create({ compactBoardAfter: 2 });
      const alice = uniqueUser('alice');
      const life = orderKey(9, 'dev');
      const board = boardWriter();
      // Items of every shape, with multi-byte text in ops and ids: the budget counts UTF-8 bytes of the wire JSON.
      const items: StorePushItem[] = [
        { seq: 1, op: noteOp(alice, 'sé', 1, 'é漢字🙂'.repeat(20)) },
        { seq: 2, op: deleteOp(alice, 's漢', life) },
        { seq: 3, board: { sessionId: 's漢', update: board.write('a', 'x'.repeat(100)), after: life } },
        { seq: 4, board: { sessionId: 'sé"\\', update: board.write('b', 'y') } },
        { seq: 5, op: noteOp(alice, 's1', 5, '"quoted"\n') },
        { seq: 6, board: { sessionId: 's漢', update: board.write('c', 'z'.repeat(300)), after: life } },
        { seq: 7, board: { sessionId: 's漢', update: board.write('d', 'w'), after: life } },
        { seq: 8, board: { sessionId: 's1', update: board.write('e', 'v'), after: '' } },
        { seq: 9, op: noteOp(alice, 's1', 9, 'x'.repeat(400)) },
      ];
      await store.push(alice, 'c', items);
      // Compacted: the merged update of 3, 6, 7 sits at 7 with clientId null.
      const all = (await store.pull(alice, 0, 1000, UNBOUNDED)).items;
      expect(all.map((item) => item.position)).toEqual([1, 2, 4, 5, 7, 8, 9]);
      expect(decodePulled(all[4]!).clientId).toBeNull();
      const sizes = all.map((item) => Buffer.byteLength(item.json));
      for (const start of [0, 2, 5]) {
        const after = start === 0 ? 0 : all[start - 1]!.position;
        let sum = 0;
        for (let k = 1; start + k <= all.length; k++) {
          sum += sizes[start + k - 1]!;
          // Exactly the budget: k items; one byte less: k - 1 (but never none).
          for (const [budget, count] of [
            [sum, k],
            [sum - 1, Math.max(1, k - 1)],
          ] as const) {
            const page = await store.pull(alice, after, 1000, budget);
            expect({ budget, positions: page.items.map((item) => item.position), more: page.more }).toEqual({
              budget,
              positions: all.slice(start, start + count).map((item) => item.position),
              more: start + count < all.length,
            });
            expect(page.items).toEqual(all.slice(start, start + count));
          }
        }
      }
      expect(await store.pull(alice, 0, 1000, 0)).toEqual({ items: all.slice(0, 1), more: true });
      // The item limit still holds inside the budget.
      expect(await store.pull(alice, 0, 2, UNBOUNDED)).toEqual({ items: all.slice(0, 2), more: true });
      expect(await store.pull(alice, 9, 10, 0)).toEqual({ items: [], more: false });
      await store.close();
    });

    it('counts ids of control characters exactly in the byte budget (6 bytes of JSON each)', async () => {
      const { store } = await setup.create();
      const alice = uniqueUser('alice');
      // The most JSON an id can take for its bytes (\u00XX each): a store that bounds sizes before it counts
      // them exactly (the fast paths of both stores) must never take its bound for the size. The server
      // allows clients only ASCII ids; the store counts whatever it holds.
      const session = '\u0001'.repeat(250);
      const client = '\u0002'.repeat(64);
      const board = boardWriter();
      const twoOps = (seq: number): StorePushItem[] => [seq, seq + 1].map((n) => ({ seq: n, op: noteOp(alice, session, n) }));
      const twoBoards = (seq: number): StorePushItem[] => [
        { seq, board: { sessionId: session, update: board.write(`a${seq}`, 'x') } },
        { seq: seq + 1, board: { sessionId: session, update: board.write(`b${seq}`, 'y'), after: '' } },
      ];
      // Every page from every cursor of the log as it stands, at its exact budget and one byte under.
      const checkPages = async (): Promise<void> => {
        const all = (await store.pull(alice, 0, 1000, UNBOUNDED)).items;
        // Not decodePulled: the wire schema holds client ids to what the server allows.
        expect(all.map((item) => (JSON.parse(item.json) as { clientId: unknown }).clientId)).toEqual(all.map(() => client));
        const sizes = all.map((item) => Buffer.byteLength(item.json));
        for (let start = 0; start < all.length; start++) {
          const after = start === 0 ? 0 : all[start - 1]!.position;
          let sum = 0;
          for (let k = 1; start + k <= all.length; k++) {
            sum += sizes[start + k - 1]!;
            for (const [budget, count] of [
              [sum, k],
              [sum - 1, Math.max(1, k - 1)],
            ] as const) {
              expect({ budget, page: await store.pull(alice, after, 1000, budget) }).toEqual({ budget, page: { items: all.slice(start, start + count), more: start + count < all.length } });
            }
          }
        }
      };
      // Two ops then two boards; then two boards then two ops. Each pair once ends the log, where the bound
      // of the candidates is the pair's alone: nothing of another shape makes up for a bound too small.
      await store.push(alice, client, [...twoOps(1), ...twoBoards(3)]);
      await checkPages();
      await store.push(alice, client, [...twoBoards(5), ...twoOps(7)]);
      await checkPages();
      await store.close();
    });

    it('ends a page with the user\'s log, holes and all, whatever user comes next in the storage\'s order', async () => {
      const { store } = await setup.create({ compactBoardAfter: 2 });
      const alice = uniqueUser('alice');
      // Compaction leaves holes in alice's positions; the next users' ids sort right after hers, so a
      // store that counts rows past her last one (scanning by count, not by her id) must count hers only.
      const board = boardWriter();
      await store.push(alice, 'c', [...ops(alice, 1, 2), ...[3, 4, 5, 6, 7].map((seq) => ({ seq, board: { sessionId: 's1', update: board.write(`k${seq}`, 'v') } }))]);
      for (const next of [`${alice}0`, `${alice}~`]) await store.push(next, 'c', ops(next, 1, 20));
      const all = (await store.pull(alice, 0, 1000, UNBOUNDED)).items;
      expect(all.length).toBeLessThan(7);
      expect(all.at(-1)!.position).toBe(await store.head(alice));
      for (let start = 0; start <= all.length; start++) {
        const after = start === 0 ? 0 : all[start - 1]!.position;
        for (const limit of [1, all.length - start, all.length - start + 1, 1000]) {
          if (limit < 1) continue;
          expect({ after, limit, page: await store.pull(alice, after, limit, UNBOUNDED) }).toEqual({ after, limit, page: { items: all.slice(start, start + limit), more: start + limit < all.length } });
        }
        // At the rest's exact size, and a byte under: where a store counts sizes exactly.
        const rest = all.slice(start).reduce((sum, item) => sum + Buffer.byteLength(item.json), 0);
        expect(await store.pull(alice, after, 1000, rest)).toEqual({ items: all.slice(start), more: false });
        if (start < all.length) expect(await store.pull(alice, after, 1000, rest - 1)).toEqual({ items: all.slice(start, Math.max(start + 1, all.length - 1)), more: start < all.length - 1 });
      }
      await store.close();
    });

    it('keeps what was pushed after being closed and reopened', async () => {
      const { store, reopen } = await setup.create();
      const alice = uniqueUser('alice');
      const items = ops(alice, 1, 3);
      await store.push(alice, 'c', items);
      const again = await reopen();
      expect((await pullAll(again, alice)).map(opOf)).toEqual(items.map((item) => ('op' in item ? item.op : null)));
      expect(await again.lastSeq(alice, 'c')).toBe(3);
      expect(await again.push(alice, 'c', ops(alice, 3, 4))).toMatchObject({ status: 'applied', lastSeq: 4, appended: 1, head: 4 });
      await again.close();
    });

    it('keeps its epoch through a reopen, with its data (guarantee 10)', async () => {
      const { store, reopen } = await setup.create();
      const epoch = await store.epoch();
      expect(epoch).toMatch(EPOCH);
      expect(await store.epoch()).toBe(epoch);
      const alice = uniqueUser('alice');
      await store.push(alice, 'c', ops(alice, 1, 1));
      const again = await reopen();
      expect(await again.epoch()).toBe(epoch);
      if (setup.peer) {
        const peer = await setup.peer();
        expect(await peer.epoch()).toBe(epoch);
        await peer.close();
      }
      await again.close();
      await expect(again.epoch()).rejects.toMatchObject({ code: 'storage/closed' });
    });

    it('refuses work after close with storage/closed', async () => {
      const { store } = await setup.create();
      await store.close();
      await store.close();
      await expect(store.head(uniqueUser())).rejects.toMatchObject({ code: 'storage/closed' });
    });

    const peerOf = setup.peer;
    if (peerOf) {
      it('pokes subscribers on another instance sharing the storage', async () => {
        const { store } = await setup.create();
        const peer = await peerOf();
        const alice = uniqueUser('alice');
        const { poked, off } = await watch(peer, alice);
        const carried = await pokesOf(peer, alice);
        await store.push(alice, 'c', ops(alice, 1, 3));
        expect(await poked).toBe(3);
        off();
        await expect.poll(() => carried.pokes.length).toBe(1);
        expect(carried.pokes[0]).toEqual({ head: 3, appended: { after: 0, items: await pulledAfter(peer, alice, 0) } });
        carried.off();
        expect(await pullAll(peer, alice)).toHaveLength(3);
        await peer.close();
        await store.close();
      });
    }
  });
}
