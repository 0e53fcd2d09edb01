/**
 * LangGraph's own conformance suite (`@langchain/langgraph-checkpoint-validation`)
 * run against TabulaCheckpointSaver, shared by the Node run (fake-indexeddb)
 * and the Chromium run (real IndexedDB).
 *
 * The suite registers its tests through Vitest's globals. Rather than turn
 * globals on for every test file, this module installs the few it uses for
 * the file that calls it, then loads the suite.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApproxTokenCounter, openTabula, type Tabula } from '../../../src/index.js';
import { TabulaCheckpointSaver } from '../../../src/langgraph/index.js';

let counter = 0;

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

/** Registers the full suite. Call at the top level of a test file. */
export async function registerConformanceSuite(): Promise<void> {
  Object.assign(globalThis, { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it });
  const { validate } = await import('@langchain/langgraph-checkpoint-validation');
  const open = new Map<TabulaCheckpointSaver, { tabula: Tabula; name: string }>();
  validate({
    checkpointerName: 'TabulaCheckpointSaver',
    async createCheckpointer() {
      counter += 1;
      // A fresh database per checkpointer: the suite requires instances not to see each other's data.
      const name = `langgraph-conformance-${Date.now().toString(36)}-${counter}`;
      const tabula = await openTabula({ name, tokenCounter: new ApproxTokenCounter() });
      const saver = new TabulaCheckpointSaver({ tabula });
      open.set(saver, { tabula, name });
      return saver;
    },
    async destroyCheckpointer(saver) {
      const entry = open.get(saver);
      if (!entry) return;
      open.delete(saver);
      await entry.tabula.close();
      await deleteDatabase(entry.name);
    },
  });
}
