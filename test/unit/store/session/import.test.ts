/**
 * Imports land whole and valid, or are refused with schema/invalid naming
 * the field (issue 10 #4): nothing of a file is dropped or changed silently.
 */
import { describe, expect, it } from 'vitest';
import type { SessionExport } from '../../../../src/index.js';
import { freshTabula } from '../helpers.js';

async function sampleExport(): Promise<SessionExport> {
  const tabula = await freshTabula({ userId: 'alice' });
  const session = await tabula.session('source');
  await session.append([
    { role: 'user', content: 'one' },
    { role: 'assistant', content: 'two' },
  ]);
  await session.save({ summary: 's', context: { step: 1 } });
  await session.note('a note');
  await session.memory().set('k', 1);
  await session.journal.record({ op: 1 });
  const data = JSON.parse(JSON.stringify(await session.export())) as SessionExport;
  await tabula.close();
  return data;
}

/** Imports `data` and expects a schema/invalid naming `field`; the database is left without the session. */
async function expectRefused(data: unknown, field: RegExp): Promise<void> {
  const tabula = await freshTabula({ userId: 'alice' });
  const error: unknown = await tabula.importSession(data as SessionExport).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toMatchObject({ code: 'schema/invalid' });
  expect((error as Error).message).toMatch(field);
  expect(await tabula.sessions()).toEqual([]);
  await tabula.close();
}

describe('importSession() refuses what it would drop or change', () => {
  it('duplicate message ids', async () => {
    const data = await sampleExport();
    await expectRefused({ ...data, messages: [data.messages[0], { ...data.messages[1], id: data.messages[0]!.id }] }, /messages\[1\]\.id: duplicate message id/);
  });

  it('version 0 with a non-empty state', async () => {
    const data = await sampleExport();
    await expectRefused({ ...data, version: 0 }, /version: version 0/);
  });

  it('a null memory value, a duplicate memory key, a __proto__ memory key', async () => {
    const data = await sampleExport();
    await expectRefused({ ...data, memory: [{ scope: 'default', key: 'k', value: null }] }, /memory\[0\]\.value/);
    await expectRefused({ ...data, memory: [data.memory[0], data.memory[0]] }, /memory\[1\]\.key: duplicate/);
    await expectRefused({ ...data, memory: [{ scope: 'default', key: '__proto__', value: 1 }] }, /memory\[0\]\.key.*__proto__/);
  });

  it('an empty note and a note over 500 code points', async () => {
    const data = await sampleExport();
    await expectRefused({ ...data, notes: [{ ...data.notes[0], text: '' }] }, /notes\[0\]\.text/);
    await expectRefused({ ...data, notes: [{ ...data.notes[0], text: 'x'.repeat(501) }] }, /notes\[0\]\.text/);
  });

  it('ids, scopes and users the API could not open: over-long, or not valid Unicode', async () => {
    const data = await sampleExport();
    await expectRefused({ ...data, sessionId: 's'.repeat(257) }, /sessionId/);
    await expectRefused({ ...data, sessionId: '\ud800' }, /sessionId.*surrogate/);
    await expectRefused({ ...data, userId: 'u'.repeat(257) }, /userId/);
    await expectRefused({ ...data, memory: [{ scope: 'x'.repeat(129), key: 'k', value: 1 }] }, /memory\[0\]\.scope/);
    await expectRefused({ ...data, notes: [{ ...data.notes[0], scope: 'x'.repeat(129) }] }, /notes\[0\]\.scope/);
  });

  it('a journal watermark past its entries', async () => {
    const data = await sampleExport();
    await expectRefused({ ...data, journal: { entries: data.journal.entries, watermark: 5 } }, /journal\.watermark/);
  });

  it('a __proto__ key or 20,000-deep nesting anywhere, named by its path, never a RangeError', async () => {
    const data = await sampleExport();
    await expectRefused(JSON.parse(JSON.stringify(data).replace('"step":1', '"__proto__":1')), /state\.context\.__proto__/);
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    await expectRefused({ ...data, state: { ...data.state, tasks: deep } }, /state\.tasks.*nested deeper/);
    await expectRefused({ ...data, blackboard: { plan: deep } }, /blackboard\.plan.*nested deeper/);
  });

  it('a valid file lands whole, under the importing Tabula’s user whoever the file names', async () => {
    const data = await sampleExport();
    const tabula = await freshTabula({ userId: 'bob' });
    const session = await tabula.importSession(data);
    expect(session.userId).toBe('bob');
    expect((await tabula.sessions()).map((s) => s.sessionId)).toEqual(['source']);
    const again = await session.export();
    // Order keys are re-derived for the new session's life; everything else is kept as it was.
    const withoutOrder = (d: SessionExport) => ({ ...d, updatedAt: 0, messages: d.messages.map(({ order: _order, ...m }) => m) });
    expect(withoutOrder({ ...again, userId: 'alice' })).toEqual(withoutOrder({ ...data, blackboard: {} }));
    expect(await tabula.sessions({ userId: 'alice' })).toEqual([]);
    await tabula.deleteSession('source');
    expect(await tabula.sessions()).toEqual([]);
    await tabula.close();
  });
});
