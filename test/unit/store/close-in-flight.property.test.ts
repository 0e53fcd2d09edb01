/**
 * Writes in flight when `tabula.close()` runs: each one either landed and
 * resolved, or rejected with a TabulaError and landed nothing, and another
 * tab on the same database sees exactly the ones that resolved. The class
 * of bug this guards: a write whose success is reported as a failure (or
 * the reverse) because close() pulled something from under it after it
 * committed (the change channel threw a raw InvalidStateError at a caller
 * whose message had landed). Random writes of every kind start, close()
 * runs after a random number of them, and the outcomes are checked against
 * what a second Tabula reads.
 * Seeded: the seed is printed; TABULA_SEED=<n> replays it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTabulaError, type Session } from '../../../src/index.js';
import { fcParams } from '../seed.js';
import { freshTabula } from './helpers.js';

type Kind = 'append' | 'note' | 'memory' | 'stream';
const kindArb = fc.constantFrom<Kind>('append', 'note', 'memory', 'stream');

/** Starts one write labelled `label`; resolves with whether it reported success (throws on a raw error). */
function start(session: Session, kind: Kind, label: string): Promise<boolean> {
  const run = async (): Promise<void> => {
    if (kind === 'append') await session.append({ role: 'user', content: label });
    else if (kind === 'note') await session.note(label);
    else if (kind === 'memory') await session.memory().set(label, label);
    else {
      const stream = await session.stream({ role: 'assistant' });
      stream.write(label);
      await stream.done();
    }
  };
  return run().then(
    () => true,
    (error: unknown) => {
      if (!isTabulaError(error)) throw error;
      return false;
    },
  );
}

describe('writes in flight when close() runs', () => {
  it('each one resolved and landed, or rejected with a TabulaError and landed nothing', { timeout: 300_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(kindArb, { minLength: 1, maxLength: 6 }), fc.nat(), async (kinds, cut) => {
        const a = await freshTabula();
        const b = await freshTabula({ name: a.dbName });
        try {
          const session = await a.session('s');
          const labels = kinds.map((kind, index) => `${kind}-${index}`);
          const closeAt = cut % (kinds.length + 1);
          const outcomes: Promise<boolean>[] = [];
          let closing: Promise<void> | undefined;
          for (const [index, kind] of kinds.entries()) {
            if (index === closeAt) closing = a.close();
            outcomes.push(start(session, kind, labels[index] as string));
          }
          await (closing ?? a.close());
          const resolved = await Promise.all(outcomes);
          const seen = await b.session('s');
          const messages = (await seen.messages()).map((m) => m.content);
          const notes = (await seen.notes()).map((n) => n.text);
          const memory = await seen.memory().keys();
          const landed = kinds.map((kind, index) => {
            const label = labels[index] as string;
            if (kind === 'note') return notes.includes(label);
            if (kind === 'memory') return memory.includes(label);
            return messages.includes(label);
          });
          for (const [index, kind] of kinds.entries()) {
            // A stream's first write (its streaming message) may land before close() interrupts it:
            // then it is kept, marked interrupted, and done() rejects.
            if (kind === 'stream' && !resolved[index]) continue;
            expect({ write: labels[index], landed: landed[index] }).toEqual({ write: labels[index], landed: resolved[index] });
          }
        } finally {
          await Promise.all([a.close(), b.close()]);
        }
      }),
      fcParams(40),
    );
  });
});
