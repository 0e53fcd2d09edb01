/**
 * messages({ scope, last }) keeps exactly the last `last` messages of the scope (src/store/session/messages.ts),
 * and toContext() with the same options gives the same messages.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ApproxTokenCounter, tagged } from '../../../../src/core/index.js';
import type { Tabula } from '../../../../src/index.js';
import { freshTabula } from '../helpers.js';

const opened: Tabula[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((tabula) => tabula.close()));
});
async function open(): Promise<Tabula & { dbName: string }> {
  const tabula = await freshTabula({ userId: 'u', tokenCounter: new ApproxTokenCounter() });
  opened.push(tabula);
  return tabula;
}

describe('messages({ scope, last })', () => {
  it('keeps exactly the last n messages of the scope', async () => {
    const session = await (await open()).session('s');
    for (let i = 0; i < 10; i++) await session.append({ role: 'user', content: `m${i}`, name: i % 2 === 0 ? 'even' : 'odd' });
    const content = (messages: readonly { content: unknown }[]) => messages.map((m) => m.content);
    expect(content(await session.messages({ scope: tagged('even'), last: 3 }))).toEqual(['m4', 'm6', 'm8']);
    expect(content(await session.messages({ scope: tagged('even'), last: 5 }))).toEqual(['m0', 'm2', 'm4', 'm6', 'm8']);
    expect(content(await session.messages({ scope: tagged('even'), last: 50 }))).toEqual(['m0', 'm2', 'm4', 'm6', 'm8']);
    expect(await session.messages({ scope: tagged('even'), last: 0 })).toEqual([]);
    expect(content(await session.messages({ scope: tagged('odd') }))).toEqual(['m1', 'm3', 'm5', 'm7', 'm9']);
    expect(content(await session.messages({ last: 2 }))).toEqual(['m8', 'm9']);
    expect(content(await session.messages({ last: 10 }))).toHaveLength(10);
    expect(await session.messages({ last: 0 })).toEqual([]);
    expect(content(await session.toContext({ scope: tagged('odd'), last: 2 }).then((ctx) => ctx.messages))).toEqual(['m7', 'm9']);
  });
});
