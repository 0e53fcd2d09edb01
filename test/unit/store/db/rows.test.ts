/**
 * The row schema of every table (db/rows.ts), one rule at a time: a valid row
 * is returned as it is, and the same row with one field wrong is refused with
 * `schema/invalid` and zod's issue at that field's path. Mutation testing
 * cannot measure these schemas (Stryker makes no mutant in code that runs
 * at import, as building them does), so these cases are what guards each rule.
 */
import { describe, expect, it } from 'vitest';
import { TabulaError } from '../../../../src/core/errors.js';
import { checkRow } from '../../../../src/store/db/rows.js';

type Fields = Record<string, unknown>;
type Table = Parameters<typeof checkRow>[0];

const prefix = { systemPrompt: 'p', grounding: [], schemaBlock: null };
const state = { summary: null, tasks: null, plan: null, permissions: null, tools: [], context: {} };

/** A message of a checkpoint's snapshot: its order must be a real order key. */
const snapshotMessage = { id: 'm', order: '000000000000001.000000.dev', createdAt: 1, status: 'complete', message: { role: 'user', content: 'hi' } };

const VALID: Record<Table, Fields> = {
  sessions: {
    userId: 'u',
    sessionId: 's',
    version: 0,
    prefix,
    prefixOrder: '',
    summaryOrder: '',
    createdOrder: '1',
    clearedBefore: '',
    state,
    messageCount: 0,
    journalCount: 0,
    journalWatermark: 0,
    createdAt: 1,
    updatedAt: 1,
    lastOrder: '1',
    forkOf: null,
    tokenTotals: {},
  },
  messages: { id: 'm', userId: 'u', sessionId: 's', order: '1', createdAt: 1, status: 'complete', message: { role: 'user', content: 'hi' } },
  journal: { id: 'j', userId: 'u', sessionId: 's', order: '1', entry: { step: 1 } },
  notes: { id: 'n', userId: 'u', sessionId: 's', order: '1', text: 'note', runId: null, scope: null, at: 1 },
  memory: { userId: 'u', sessionId: 's', scope: 'sc', key: 'k', value: null, deleted: true, order: '1' },
  checkpoints: { id: 'c', userId: 'u', sessionId: 's', label: null, at: 1, order: '1', snapshot: { prefix, state, messages: [] } },
  outbox: { seq: 1, userId: 'u', board: { sessionId: 's', update: 'AA==' } },
  runs: { runId: 'r', userId: 'u', sessionId: 's', scope: 'sc', visit: 1, attempt: 1, status: 'running', startedAt: 1, endedAt: null },
};

/** Valid rows other than the base one: optional fields, the other branch of a nullable or a union. */
const ALSO_VALID: Array<[Table, Fields]> = [
  ['sessions', { life: 'l', after: '', journalCommitted: 0, journalThrough: 't', versionOrder: 'v', removedMessages: 0, version: 3 }],
  ['sessions', { forkOf: { userId: 'u', sessionId: 'from' }, tokenTotals: { o200k_base: { total: 10, upTo: '5', messages: 2 } } }],
  ['messages', { tokens: { o200k_base: 3 }, updateOrder: '2', status: 'streaming', streaming: 1 }],
  ['journal', { entry: null }],
  ['notes', { runId: 'r', scope: 'sc' }],
  ['memory', { value: { any: ['json'] }, deleted: false }],
  ['checkpoints', { label: 'before', snapshot: { prefix, state, messages: [snapshotMessage] } }],
  ['outbox', { board: { sessionId: 's', update: 'AA==', after: '' } }],
  ['runs', { status: 'abandoned', endedAt: 2, visit: 2, attempt: 3 }],
];

/** One field wrong: the path of zod's issue. */
const INVALID: Array<[Table, Fields, Array<string | number>]> = [
  ['sessions', { userId: 1 }, ['userId']],
  ['sessions', { version: -1 }, ['version']],
  ['sessions', { version: 1.5 }, ['version']],
  ['sessions', { prefix: { ...prefix, systemPrompt: null } }, ['prefix', 'systemPrompt']],
  ['sessions', { prefixOrder: null }, ['prefixOrder']],
  ['sessions', { summaryOrder: 1 }, ['summaryOrder']],
  ['sessions', { createdOrder: undefined }, ['createdOrder']],
  ['sessions', { life: 1 }, ['life']],
  ['sessions', { after: null }, ['after']],
  ['sessions', { clearedBefore: 0 }, ['clearedBefore']],
  ['sessions', { state: { ...state, tools: 'all' } }, ['state', 'tools']],
  ['sessions', { messageCount: -1 }, ['messageCount']],
  ['sessions', { messageCount: 0.5 }, ['messageCount']],
  ['sessions', { journalCount: -1 }, ['journalCount']],
  ['sessions', { journalCount: 2.5 }, ['journalCount']],
  ['sessions', { journalWatermark: -1 }, ['journalWatermark']],
  ['sessions', { journalWatermark: 0.5 }, ['journalWatermark']],
  ['sessions', { journalCommitted: -1 }, ['journalCommitted']],
  ['sessions', { journalCommitted: 0.5 }, ['journalCommitted']],
  ['sessions', { journalThrough: 1 }, ['journalThrough']],
  ['sessions', { versionOrder: 1 }, ['versionOrder']],
  ['sessions', { createdAt: '1' }, ['createdAt']],
  ['sessions', { updatedAt: null }, ['updatedAt']],
  ['sessions', { lastOrder: 1 }, ['lastOrder']],
  ['sessions', { forkOf: undefined }, ['forkOf']],
  ['sessions', { forkOf: { userId: 'u' } }, ['forkOf', 'sessionId']],
  ['sessions', { forkOf: { sessionId: 's' } }, ['forkOf', 'userId']],
  ['sessions', { tokenTotals: { o: { total: 1, upTo: '1' } } }, ['tokenTotals', 'o', 'messages']],
  ['sessions', { tokenTotals: { o: { total: '1', upTo: '1', messages: 1 } } }, ['tokenTotals', 'o', 'total']],
  ['sessions', { tokenTotals: { o: { total: 1, upTo: 1, messages: 1 } } }, ['tokenTotals', 'o', 'upTo']],
  ['sessions', { removedMessages: -1 }, ['removedMessages']],
  ['sessions', { removedMessages: 1.5 }, ['removedMessages']],
  ['messages', { order: '' }, ['order']],
  ['messages', { status: 'streaming' }, ['streaming']],
  ['messages', { streaming: 1 }, ['streaming']],
  ['messages', { streaming: 2, status: 'streaming' }, ['streaming']],
  ['messages', { tokens: { o: '1' } }, ['tokens', 'o']],
  ['messages', { updateOrder: 1 }, ['updateOrder']],
  ['messages', { message: { role: 'user', content: 1 } }, ['message', 'content']],
  ['messages', { createdAt: null }, ['createdAt']],
  ['journal', { id: 1 }, ['id']],
  ['journal', { order: '' }, ['order']],
  ['journal', { entry: undefined }, ['entry']],
  ['journal', { sessionId: null }, ['sessionId']],
  ['notes', { order: '' }, ['order']],
  ['notes', { text: null }, ['text']],
  ['notes', { runId: undefined }, ['runId']],
  ['notes', { scope: 1 }, ['scope']],
  ['notes', { at: '1' }, ['at']],
  ['notes', { userId: undefined }, ['userId']],
  ['memory', { order: '' }, ['order']],
  ['memory', { value: undefined }, ['value']],
  ['memory', { deleted: 'yes' }, ['deleted']],
  ['memory', { key: 1 }, ['key']],
  ['memory', { scope: null }, ['scope']],
  ['checkpoints', { order: '' }, ['order']],
  ['checkpoints', { label: undefined }, ['label']],
  ['checkpoints', { at: null }, ['at']],
  ['checkpoints', { snapshot: { prefix, state } }, ['snapshot', 'messages']],
  ['checkpoints', { snapshot: { prefix, state, messages: [{ ...snapshotMessage, order: '1' }] } }, ['snapshot', 'messages', 0, 'order']],
  ['runs', { visit: 0 }, ['visit']],
  ['runs', { visit: 1.5 }, ['visit']],
  ['runs', { attempt: 0 }, ['attempt']],
  ['runs', { attempt: 2.5 }, ['attempt']],
  ['runs', { status: 'done' }, ['status']],
  ['runs', { endedAt: undefined }, ['endedAt']],
  ['runs', { startedAt: '1' }, ['startedAt']],
  ['runs', { scope: 1 }, ['scope']],
  ['runs', { runId: null }, ['runId']],
];

/** An outbox row is an op or a board update; a row that is neither is refused as a whole. */
const INVALID_OUTBOX: Fields[] = [
  { seq: 1, userId: 'u' },
  { seq: 1, userId: 'u', board: { sessionId: 's', update: 1 } },
  { seq: 1, userId: 'u', board: { sessionId: 's', update: 'AA==', after: 1 } },
  { seq: 1, userId: 'u', board: { update: 'AA==' } },
  { seq: '1', userId: 'u', board: { sessionId: 's', update: 'AA==' } },
  { seq: 1, userId: 'u', op: { kind: 'no.such.op' } },
  // Every row names the user whose sync pushes it (an op row, the op's user), under its seq.
  { seq: 1, board: { sessionId: 's', update: 'AA==' } },
  { userId: 'u', board: { sessionId: 's', update: 'AA==' } },
];

const issuesOf = (table: Table, row: unknown): Array<{ path: unknown[] }> => {
  try {
    checkRow(table, 'key', row);
    return [];
  } catch (error) {
    expect(error).toBeInstanceOf(TabulaError);
    expect((error as TabulaError).code).toBe('schema/invalid');
    return (error as { issues: Array<{ path: unknown[] }> }).issues;
  }
};

describe('row schemas of every table', () => {
  it.each(Object.entries(VALID) as Array<[Table, Fields]>)('accept a valid %s row, returned as it is', (table, row) => {
    expect(checkRow(table, 'key', row)).toBe(row);
  });

  it.each(ALSO_VALID)('accept a %s row with %o', (table, fields) => {
    const row = { ...VALID[table], ...fields };
    expect(checkRow(table, 'key', row)).toBe(row);
  });

  it.each(INVALID)('refuse a %s row with %o, at that path', (table, fields, path) => {
    expect(issuesOf(table, { ...VALID[table], ...fields }).map((issue) => issue.path)).toEqual([path]);
  });

  it.each(INVALID_OUTBOX)('refuse the outbox row %o', (row) => {
    expect(issuesOf('outbox', row).length).toBeGreaterThan(0);
  });

  it.each(Object.keys(VALID) as Table[])('refuse a %s row that is not an object', (table) => {
    for (const value of [null, undefined, 'row', 1, []]) expect(issuesOf(table, value).length).toBeGreaterThan(0);
  });
});
