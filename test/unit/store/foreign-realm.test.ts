/**
 * A plain object made in another realm (a vm context in Node, an iframe in
 * the browser) is JSON data everywhere: its own keys are its data, as for
 * JSON.stringify. `session.save()` accepted one while `blackboard.update()`
 * and the token counter refused it as "not a plain object", because each
 * module had its own test of plainness; there is one now (core/args.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isPlainObject } from '../../../src/core/args.js';
import { createTokenCounter } from '../../../src/index.js';
import { freshTabula } from './helpers.js';

/** Evaluates `code` in a new realm: a vm context in Node, an iframe in the browser. */
async function inAnotherRealm(code: string): Promise<unknown> {
  if (typeof document === 'undefined') {
    // Kept out of Vite's static analysis: node:vm exists only in Node.
    const vm = (await import(/* @vite-ignore */ ['node', 'vm'].join(':'))) as { runInNewContext(code: string): unknown };
    return vm.runInNewContext(code);
  }
  const frame = document.createElement('iframe');
  document.body.append(frame);
  const realm = frame.contentWindow as unknown as { eval(code: string): unknown };
  return realm.eval(code);
}

afterEach(() => {
  if (typeof document !== 'undefined') for (const frame of document.querySelectorAll('iframe')) frame.remove();
});

describe('a plain object from another realm', () => {
  it('is a plain object of a prototype other than ours', async () => {
    const foreign = await inAnotherRealm('({ a: 1 })');
    expect(Object.getPrototypeOf(foreign)).not.toBe(Object.prototype);
    expect(isPlainObject(foreign)).toBe(true);
    // Still refused: instances of any realm's classes, and arrays.
    expect(isPlainObject(await inAnotherRealm('new Map()'))).toBe(false);
    expect(isPlainObject(await inAnotherRealm('[1]'))).toBe(false);
  });

  it('is accepted by session.save() and blackboard.update() alike', async () => {
    const tabula = await freshTabula();
    try {
      const session = await tabula.session('s');
      await session.save((await inAnotherRealm('({ plan: { step: 1 } })')) as { plan: { step: number } });
      expect((await session.state()).plan).toEqual({ step: 1 });
      const board = session.blackboard;
      await board.whenLoaded;
      board.update((await inAnotherRealm('({ city: "Lisbon", days: { n: 3 } })')) as Record<string, never>);
      expect(board.toJSON()).toEqual({ city: 'Lisbon', days: { n: 3 } });
    } finally {
      await tabula.close();
    }
  });

  it('is a message the token counter counts, as session.append() stores it', async () => {
    const counter = createTokenCounter({ worker: 'none' });
    try {
      const message = (await inAnotherRealm('({ role: "user", content: "hello there" })')) as { role: 'user'; content: string };
      expect(await counter.count([message])).toBe(await counter.count([{ role: 'user', content: 'hello there' }]));
      const tabula = await freshTabula();
      try {
        const session = await tabula.session('s');
        await session.append(message);
        expect((await session.messages()).map((m) => m.content)).toEqual(['hello there']);
      } finally {
        await tabula.close();
      }
    } finally {
      counter.close();
    }
  });
});
