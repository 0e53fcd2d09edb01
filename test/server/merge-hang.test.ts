/**
 * The old path compaction took, shown hanging: `Y.mergeUpdates` never returns
 * on the 14 bytes of test/unit/core/yjs-bytes.ts `hangUpdate` beside a fresh
 * doc's first map set of the same client. It runs in a worker, so it can be
 * stopped, beside a control merge that returns. Node only (a worker from
 * source text), so it lives with the server tests; the rule that refuses the
 * bytes is tested in test/unit/core/board-update.test.ts.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { hangUpdate, struct, update } from '../unit/core/yjs-bytes.js';

describe('Y.mergeUpdates on a clock past 2^53', () => {
  it('Y.mergeUpdates never returns on the 14 bytes and a fresh doc\'s first map set of the same client (in a worker)', async () => {
    // The old path, which compaction took: run where it can be stopped, beside a control that returns.
    const merge = (hangs: boolean) =>
      new Promise<'returned' | 'still running'>((resolve, reject) => {
        const worker = new Worker(
          `const Y = require(${JSON.stringify(createRequire(import.meta.url).resolve('yjs'))});
           const { parentPort, workerData } = require('node:worker_threads');
           const doc = new Y.Doc(); doc.clientID = 1; doc.getMap('blackboard').set('k', 1);
           parentPort.postMessage('started');
           Y.mergeUpdates([Y.encodeStateAsUpdate(doc), new Uint8Array(workerData)]);
           parentPort.postMessage('returned');`,
          { eval: true, workerData: [...(hangs ? hangUpdate(1) : update([{ client: 1, clock: 2 ** 40, structs: [struct.gc(1)] }]))] },
        );
        let timer: ReturnType<typeof setTimeout> | undefined;
        worker.on('error', reject);
        worker.on('message', (message) => {
          if (message === 'started') {
            // Two tiny updates merge in well under a millisecond; 3 s on a loaded machine is a hang.
            timer = setTimeout(() => {
              void worker.terminate();
              resolve('still running');
            }, 3000);
            return;
          }
          clearTimeout(timer);
          void worker.terminate();
          resolve('returned');
        });
      });
    expect(await merge(false)).toBe('returned');
    expect(await merge(true)).toBe('still running');
  }, 30_000);
});
