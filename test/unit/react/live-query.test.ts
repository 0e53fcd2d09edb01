/** createLiveQuery: the store behind the React hooks, without React. */
import { describe, expect, it } from 'vitest';
import { createLiveQuery } from '../../../src/react/index.js';

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Polls wait for an event, not a fixed time: generous, for a loaded 2-core machine. */
const WAIT = { timeout: 15_000 };

describe('createLiveQuery', () => {
  it('attaches its source on the first subscriber, detaches after the last, and re-reads on change', async () => {
    let attached = 0;
    let fire = () => undefined as void;
    let value = 1;
    const query = createLiveQuery(
      (onChange) => {
        attached += 1;
        fire = onChange;
        return () => {
          attached -= 1;
        };
      },
      () => Promise.resolve(value),
    );
    expect(query.getSnapshot()).toEqual({ status: 'loading' });
    const notified: number[] = [];
    const stopA = query.subscribe(() => notified.push(1));
    const stopB = query.subscribe(() => notified.push(2));
    expect(attached).toBe(1);
    await expect.poll(() => query.getSnapshot(), WAIT).toEqual({ status: 'ready', data: 1 });
    const first = query.getSnapshot();
    expect(query.getSnapshot()).toBe(first);
    value = 2;
    fire();
    await expect.poll(() => query.getSnapshot(), WAIT).toEqual({ status: 'ready', data: 2 });
    expect(notified).toEqual([1, 2, 1, 2]);
    stopA();
    expect(attached).toBe(1);
    stopB();
    expect(attached).toBe(0);
  });

  it('never overlaps reads: changes during a read cause exactly one more read', async () => {
    let fire = () => undefined as void;
    const reads: ReturnType<typeof deferred<number>>[] = [];
    const query = createLiveQuery(
      (onChange) => {
        fire = onChange;
        return () => undefined;
      },
      () => {
        const read = deferred<number>();
        reads.push(read);
        return read.promise;
      },
    );
    query.subscribe(() => undefined);
    fire();
    fire();
    fire();
    expect(reads).toHaveLength(1);
    reads[0]!.resolve(1);
    await expect.poll(() => reads.length, WAIT).toBe(2);
    reads[1]!.resolve(2);
    await expect.poll(() => query.getSnapshot(), WAIT).toEqual({ status: 'ready', data: 2 });
    expect(reads).toHaveLength(2);
  });

  it('holds the error of a failed read, and recovers on the next change', async () => {
    let fire = () => undefined as void;
    let fail = true;
    const query = createLiveQuery(
      (onChange) => {
        fire = onChange;
        return () => undefined;
      },
      () => (fail ? Promise.reject(new Error('closed')) : Promise.resolve('ok')),
    );
    query.subscribe(() => undefined);
    await expect.poll(() => query.getSnapshot(), WAIT).toEqual({ status: 'error', error: new Error('closed') });
    fail = false;
    fire();
    await expect.poll(() => query.getSnapshot(), WAIT).toEqual({ status: 'ready', data: 'ok' });
  });
});
