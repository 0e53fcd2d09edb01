/**
 * serve(): the engine a worker entry exposes, run here with a stand-in
 * global scope over real MessageChannels. A dedicated worker serves its one
 * page on its own scope; a SharedWorker gives each connecting tab its own
 * engine over one loaded encoding, so one tab's cancel never reaches
 * another's request (issue 10 item 10).
 */
import * as Comlink from 'comlink';
import * as o200k from 'gpt-tokenizer/encoding/o200k_base';
import { afterEach, describe, expect, it } from 'vitest';
import type { CountingEngine, EncodingLoaders } from '../../../src/tokens/engine.js';
import { serveIn, sharedScope } from './fake-workers.js';
import { SAMPLES } from './samples.js';

const plain = { disallowedSpecial: new Set<string>() };
const open: MessagePort[] = [];
afterEach(() => open.splice(0).forEach((port) => port.close()));

function channel(): MessageChannel {
  const made = new MessageChannel();
  open.push(made.port1, made.port2);
  return made;
}

/** o200k_base, counting how often it is loaded. */
function counted(): { loaders: EncodingLoaders; loads: () => number } {
  let loads = 0;
  return {
    loaders: {
      o200k_base: () => {
        loads += 1;
        return import('gpt-tokenizer/encoding/o200k_base');
      },
    },
    loads: () => loads,
  };
}

describe('serve()', () => {
  it('in a dedicated worker, exposes an engine on the worker scope', async () => {
    const { port1, port2 } = channel();
    serveIn(port2, counted().loaders, false);
    const engine = Comlink.wrap<CountingEngine>(port1);
    await engine.load('o200k_base');
    expect(await engine.countTexts('o200k_base', [SAMPLES.english!, SAMPLES.code!])).toEqual([o200k.countTokens(SAMPLES.english!, plain), o200k.countTokens(SAMPLES.code!, plain)]);
    await expect(engine.load('cl100k_base')).rejects.toThrow(/does not hold the encoding cl100k_base/);
  });

  it('in a SharedWorker, each connecting port gets its own engine over one loaded encoding', async () => {
    const { loaders, loads } = counted();
    const scope = sharedScope(loaders);
    const [a, b] = [channel(), channel()];
    scope.connect(a.port2);
    scope.connect(b.port2);
    const [tabA, tabB] = [Comlink.wrap<CountingEngine>(a.port1), Comlink.wrap<CountingEngine>(b.port1)];
    const large = `${SAMPLES.code}\n`.repeat(8_000);
    const cancels: Promise<void>[] = [];
    // Tab A cancels its own "c1" while tab B's "c1" is under way: B's count still completes.
    const onProgress = Comlink.proxy(() => {
      if (cancels.length === 0) cancels.push(tabA.cancel('c1'));
    });
    expect(await tabB.countLarge('o200k_base', 'c1', large, onProgress)).toBe(o200k.countTokens(large, plain));
    expect(cancels).toHaveLength(1);
    await Promise.all(cancels);
    expect(await tabA.countTexts('o200k_base', [SAMPLES.chinese!])).toEqual([o200k.countTokens(SAMPLES.chinese!, plain)]);
    expect(loads()).toBe(1);
  });

  it('a connect event without a port is ignored', () => {
    const scope = sharedScope(counted().loaders);
    expect(() => scope.connect(undefined)).not.toThrow();
  });
});
