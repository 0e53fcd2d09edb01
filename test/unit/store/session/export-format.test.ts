/**
 * parseSessionExport() (the public validator of the export format, export.ts)
 * on its own, without a database: what a valid file may hold (the limits
 * exactly at their edge), and that each refusal is schema/invalid naming the
 * field at fault and saying what is wrong with it. import.test.ts has the
 * same refusals through importSession().
 */
import { describe, expect, it } from 'vitest';
import { isTabulaError, parseSessionExport, type SessionExport } from '../../../../src/index.js';

const ORDER_A = '000001700000000.000000.clientA';
const ORDER_B = '000001700000001.000000.clientA';

/** A small valid export, written by hand: every list holds one entry. */
function validExport(): SessionExport {
  return {
    format: 'tabula.session',
    formatVersion: 1,
    userId: 'alice',
    sessionId: 'chat',
    createdAt: 1,
    updatedAt: 2,
    version: 1,
    forkOf: null,
    prefix: { systemPrompt: 'be brief', grounding: [], schemaBlock: null },
    state: { summary: 's', tasks: null, plan: null, permissions: null, tools: [], context: { step: 1 } },
    messages: [{ id: 'm1', order: ORDER_A, createdAt: 1, status: 'complete', message: { role: 'user', content: 'hi' } }],
    journal: { entries: [{ did: 'x' }], watermark: 0 },
    notes: [{ text: 'a note', runId: null, scope: null, at: 1 }],
    memory: [{ scope: 'default', key: 'k', value: 1 }],
  };
}

/** The schema/invalid error parseSessionExport throws for `data`. */
function refusal(data: unknown): Error & { code: string } {
  try {
    parseSessionExport(data);
  } catch (error) {
    if (isTabulaError(error)) return error;
    throw error;
  }
  throw new Error('parseSessionExport accepted the file');
}

describe('parseSessionExport accepts', () => {
  it('a valid file, returned as it came', () => {
    const data = validExport();
    expect(parseSessionExport(data)).toEqual(data);
  });

  it('each limit at its edge: a watermark equal to the entries, version 0 with an empty state, ids of 128 and 256 characters, a blackboard', () => {
    const edge: SessionExport = {
      ...validExport(),
      sessionId: 's'.repeat(256),
      userId: 'u'.repeat(256),
      version: 0,
      state: { summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} },
      journal: { entries: [1, 2], watermark: 2 },
      messages: [{ ...validExport().messages[0]!, id: 'i'.repeat(128) }],
      memory: [
        { scope: 'x'.repeat(128), key: 'y'.repeat(128), value: false },
        // The same key in two scopes is two entries, not a duplicate.
        { scope: 'other', key: 'y'.repeat(128), value: 0 },
      ],
      notes: [{ text: 'n'.repeat(500), runId: 'r'.repeat(128), scope: 'x'.repeat(128), at: 3 }],
      forkOf: { userId: 'alice', sessionId: 'parent' },
      blackboard: { plan: ['a'] },
    };
    expect(parseSessionExport(edge)).toEqual(edge);
  });

  it('two messages with their own ids', () => {
    const data = validExport();
    const two = { ...data, messages: [data.messages[0]!, { ...data.messages[0]!, id: 'm2', order: ORDER_B }] };
    expect(parseSessionExport(two).messages.map((m) => m.id)).toEqual(['m1', 'm2']);
  });
});

describe('parseSessionExport refuses with schema/invalid, naming the field', () => {
  const cases: { what: string; change: (data: SessionExport) => unknown; message: RegExp }[] = [
    { what: 'another format', change: (d) => ({ ...d, format: 'other' }), message: /format/ },
    { what: 'another format version', change: (d) => ({ ...d, formatVersion: 2 }), message: /formatVersion/ },
    { what: 'a fractional version', change: (d) => ({ ...d, version: 1.5 }), message: /version/ },
    { what: 'a negative version', change: (d) => ({ ...d, version: -1 }), message: /version/ },
    {
      what: 'version 0 with a saved state',
      change: (d) => ({ ...d, version: 0 }),
      message: /version: version 0 means the state was never saved, but state holds values/,
    },
    { what: 'an unknown top-level field', change: (d) => ({ ...d, extra: 1 }), message: /extra/ },
    { what: 'an empty message id', change: (d) => ({ ...d, messages: [{ ...d.messages[0]!, id: '' }] }), message: /messages\[0\]\.id/ },
    { what: 'a message id over 128 characters', change: (d) => ({ ...d, messages: [{ ...d.messages[0]!, id: 'i'.repeat(129) }] }), message: /messages\[0\]\.id/ },
    { what: 'a bad order key', change: (d) => ({ ...d, messages: [{ ...d.messages[0]!, order: 'late' }] }), message: /messages\[0\]\.order/ },
    {
      what: 'a duplicate message id',
      change: (d) => ({ ...d, messages: [d.messages[0]!, { ...d.messages[0]!, order: ORDER_B }] }),
      message: /messages\[1\]\.id: duplicate message id "m1"/,
    },
    { what: 'a fractional watermark', change: (d) => ({ ...d, journal: { entries: [1, 2], watermark: 0.5 } }), message: /journal\.watermark/ },
    {
      what: 'a watermark past the entries',
      change: (d) => ({ ...d, journal: { entries: [1], watermark: 2 } }),
      message: /journal\.watermark: watermark 2 is past the 1 journal entries/,
    },
    { what: 'an empty note', change: (d) => ({ ...d, notes: [{ ...d.notes[0]!, text: '' }] }), message: /notes\[0\]\.text: a note cannot be empty/ },
    {
      what: 'a note over 500 characters',
      change: (d) => ({ ...d, notes: [{ ...d.notes[0]!, text: 'n'.repeat(501) }] }),
      message: /notes\[0\]\.text: a note has at most 500 characters; this one has 501/,
    },
    { what: 'a note runId over 128 characters', change: (d) => ({ ...d, notes: [{ ...d.notes[0]!, runId: 'r'.repeat(129) }] }), message: /notes\[0\]\.runId/ },
    {
      what: 'a null memory value',
      change: (d) => ({ ...d, memory: [{ scope: 'default', key: 'k', value: null }] }),
      message: /memory\[0\]\.value: a memory value cannot be null/,
    },
    {
      what: 'a duplicate memory key in one scope',
      change: (d) => ({ ...d, memory: [d.memory[0]!, { ...d.memory[0]!, value: 2 }] }),
      message: /memory\[1\]\.key: duplicate memory key "k" in scope "default"/,
    },
    { what: 'a memory key over 128 characters', change: (d) => ({ ...d, memory: [{ scope: 'default', key: 'k'.repeat(129), value: 1 }] }), message: /memory\[0\]\.key/ },
    { what: 'a __proto__ memory key', change: (d) => ({ ...d, memory: [{ scope: 'default', key: '__proto__', value: 1 }] }), message: /memory\[0\]\.key.*__proto__/ },
    { what: 'a forkOf without its session', change: (d) => ({ ...d, forkOf: { userId: 'alice' } }), message: /forkOf\.sessionId/ },
    { what: 'a blackboard that is not a record', change: (d) => ({ ...d, blackboard: [1] }), message: /blackboard/ },
  ];

  it.each(cases)('$what', ({ change, message }) => {
    const error = refusal(change(validExport()));
    expect(error.code).toBe('schema/invalid');
    expect(error.message).toMatch(/^Not a valid Tabula session export: /);
    expect(error.message).toMatch(message);
  });

  it('a value that is not JSON, named by its path before any field is checked', () => {
    const data = validExport();
    const error = refusal({ ...data, state: { ...data.state, context: { when: new Date(0) } } });
    expect(error.code).toBe('schema/invalid');
    expect(error.message).toMatch(/^Not a valid Tabula session export: state\.context\.when: /);
    expect((error as Error & { issues?: { path: PropertyKey[] }[] }).issues?.map((issue) => issue.path)).toEqual([['state', 'context', 'when']]);
  });

  it('each rule of the format is reported as a custom issue with its path, so a caller can list them', () => {
    const data = validExport();
    const error = refusal({
      ...data,
      version: 0,
      messages: [data.messages[0]!, { ...data.messages[0]!, order: ORDER_B }],
      journal: { entries: [], watermark: 1 },
      notes: [{ ...data.notes[0]!, text: '' }],
      memory: [{ scope: 'default', key: '__proto__', value: null }, { scope: 'default', key: '__proto__', value: 1 }],
    }) as Error & { issues?: { code: string; path: PropertyKey[]; message: string }[] };
    const issues = (error.issues ?? []).map(({ code, path, message }) => ({ code, path: path.join('.'), message: message.split(/[ (]/)[0] ?? '' }));
    expect(issues.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : x.message < y.message ? -1 : 1))).toEqual([
      { code: 'custom', path: 'journal.watermark', message: 'watermark' },
      { code: 'custom', path: 'memory.0.key', message: 'the' },
      { code: 'custom', path: 'memory.0.value', message: 'a' },
      { code: 'custom', path: 'memory.1.key', message: 'duplicate' },
      { code: 'custom', path: 'memory.1.key', message: 'the' },
      { code: 'custom', path: 'messages.1.id', message: 'duplicate' },
      { code: 'custom', path: 'notes.0.text', message: 'a' },
      { code: 'custom', path: 'version', message: 'version' },
    ]);
  });

  it('every problem of a file at once, each with its path in the error’s issues', () => {
    const data = validExport();
    const error = refusal({ ...data, journal: { entries: [], watermark: 1 }, memory: [{ scope: 'default', key: 'k', value: null }] }) as Error & {
      issues?: { path: PropertyKey[] }[];
    };
    expect(error.issues?.map((issue) => issue.path.join('.')).sort()).toEqual(['journal.watermark', 'memory.0.value']);
  });
});
