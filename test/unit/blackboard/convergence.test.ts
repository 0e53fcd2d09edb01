/**
 * Seeded random convergence: five simulated tabs on one session write at
 * random while their messages arrive in random order, some dropped, some
 * delivered twice, and tabs leave and come back (a reload: a fresh doc
 * loaded from IndexedDB). Once everything is delivered, all five are equal,
 * and a doc rebuilt from IndexedDB equals them. Each failure names its seed.
 */
import * as Y from 'yjs';
import { describe, expect, it } from 'vitest';
import { createBlackboard, type Blackboard } from '../../../src/blackboard/index.js';
import { TabSyncProvider } from '../../../src/blackboard/tab-provider.js';
import type { JsonValue } from '../../../src/core/index.js';
import { persistDoc, type DocPersistence } from '../../../src/blackboard/persistence.js';
import { MemoryHub, seededRandom } from './memory-hub.js';
import { uniqueName } from '../store/helpers.js';
import { TEST_SEED } from '../seed.js';

const TABS = 5;
const SEEDS = 20;
const OPS_PER_SEED = 520; // 20 × 520 = 10,400 operations
const KEYS = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];

interface Tab {
  doc: Y.Doc;
  board: Blackboard;
  provider: TabSyncProvider;
  persistence: DocPersistence;
}

function randomValue(random: () => number): JsonValue {
  const pick = Math.floor(random() * 4);
  if (pick === 0) return Math.floor(random() * 1000);
  if (pick === 1) return `s${Math.floor(random() * 100)}`;
  if (pick === 2) return { nested: [Math.floor(random() * 10), random() < 0.5] };
  return null;
}

async function runSeed(seed: number): Promise<void> {
  const random = seededRandom(seed);
  const hub = new MemoryHub();
  const dbName = uniqueName(`converge-${seed}`);
  const open = (index: number): Tab => {
    const doc = new Y.Doc();
    const persistence = persistDoc(dbName, doc, { onError: (e) => { throw e; } });
    const provider = new TabSyncProvider(doc, { peerId: `tab${index}-${random().toString(36).slice(2, 7)}`, transport: hub.connect(), onError: () => undefined, resyncIntervalMs: 0 });
    provider.resync();
    return { doc, board: createBlackboard({ doc }), provider, persistence };
  };
  const tabs: (Tab | null)[] = [];
  for (let i = 0; i < TABS; i++) tabs.push(open(i));
  await Promise.all(tabs.map((tab) => tab!.persistence.whenLoaded));

  for (let op = 0; op < OPS_PER_SEED; op++) {
    const index = Math.floor(random() * TABS);
    const tab = tabs[index];
    const roll = random();
    if (tab && roll < 0.35) tab.board.set(KEYS[Math.floor(random() * KEYS.length)]!, randomValue(random));
    else if (tab && roll < 0.45) tab.board.delete(KEYS[Math.floor(random() * KEYS.length)]!);
    else if (tab && roll < 0.55) tab.board.update({ [KEYS[Math.floor(random() * KEYS.length)]!]: randomValue(random), [KEYS[Math.floor(random() * KEYS.length)]!]: randomValue(random) });
    else if (roll < 0.85 && hub.queue.length > 0) {
      const at = Math.floor(random() * hub.queue.length);
      const fate = random();
      if (fate < 0.2) hub.drop(at);
      else hub.deliver(at, fate < 0.3); // < 0.3: delivered now and again later
    } else if (roll < 0.87 && tab) {
      // The tab goes away (its writes are flushed first, as a closing tab's would be).
      await tab.persistence.flushed();
      tab.provider.close();
      await tab.persistence.close();
      tab.doc.destroy();
      tabs[index] = null;
    } else if (!tab && roll > 0.95) {
      const reopened = open(index);
      await reopened.persistence.whenLoaded;
      tabs[index] = reopened;
    }
  }

  // Everyone comes back, then full delivery and a last state-vector exchange.
  for (let i = 0; i < TABS; i++) if (!tabs[i]) tabs[i] = open(i);
  await Promise.all(tabs.map((tab) => tab!.persistence.whenLoaded));
  hub.drain();
  for (const tab of tabs) tab!.provider.resync();
  hub.drain();

  const states = tabs.map((tab) => tab!.board.toJSON());
  for (let i = 1; i < TABS; i++) expect(states[i], `seed ${seed}: tab ${i} differs from tab 0`).toEqual(states[0]);

  await Promise.all(tabs.map((tab) => tab!.persistence.flushed()));
  const rebuilt = new Y.Doc();
  const fromDisk = persistDoc(dbName, rebuilt, { onError: (e) => { throw e; } });
  await fromDisk.whenLoaded;
  expect(createBlackboard({ doc: rebuilt }).toJSON(), `seed ${seed}: the doc rebuilt from IndexedDB differs`).toEqual(states[0]);
  await fromDisk.close();
  for (const tab of tabs) {
    tab!.provider.close();
    await tab!.persistence.close();
  }
}

describe('blackboard convergence (seeded, random delivery)', () => {
  // TABULA_SEED=n replays a reported seed (Node only; the browser run uses the default seeds).
  const base = TEST_SEED;
  for (let i = 0; i < SEEDS; i++) {
    const seed = base + i;
    it(`seed ${seed}: ${TABS} tabs, ${OPS_PER_SEED} operations, drops, duplicates, reloads`, async () => {
      await runSeed(seed);
    }, 60_000);
  }
});
