/**
 * Session handles held weakly (issue 10 #13), in Node on fake-indexeddb.
 * Heap growth after 2,000 `tabula.session('s')` calls whose handles the app
 * drops, against the same loop where the app closes every handle itself
 * (what it had to do before handles were held weakly). Goal: dropping
 * handles costs no more than closing them, within 2 MB.
 */
import 'fake-indexeddb/auto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { openTabula } from '../src/index.js';
import { report } from './lib/report.js';

const CALLS = 2_000;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

async function settle(): Promise<void> {
  // Several rounds: FinalizationRegistry callbacks run between them and free what they release.
  for (let round = 0; round < 5; round++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function growthMb(closeEach: boolean): Promise<number> {
  const tabula = await openTabula({ name: `bench-handles-${closeEach ? 'closed' : 'dropped'}-${Date.now()}` });
  await (await tabula.session('s')).close();
  await settle();
  const before = process.memoryUsage().heapUsed;
  const loop = async () => {
    for (let i = 0; i < CALLS; i++) {
      const handle = await tabula.session('s');
      if (closeEach) await handle.close();
    }
  };
  await loop();
  await settle();
  const after = process.memoryUsage().heapUsed;
  await tabula.close();
  return (after - before) / 1e6;
}

const closed = await growthMb(true);
const dropped = await growthMb(false);
report({
  name: 'handles',
  title: `Heap growth after ${CALLS} tabula.session() calls (Node, fake-indexeddb)`,
  baseline: 'the same loop closing every handle explicitly',
  rows: [{ case: `${CALLS} handles dropped by the app`, unit: 'MB', tabula: dropped, baseline: closed, note: 'before the fix: +23.5 MB' }],
  goals: ['dropped handles cost at most 2 MB more than closed ones'],
});
