import { describe, expect, it } from 'vitest';
import {
  allOf,
  anyOf,
  applyScope,
  isTabulaError,
  lastTurns,
  not,
  since,
  tagged,
  type ContextScope,
  type Message,
} from '../../../src/core/index.js';
import { scopeIndices } from '../../../src/core/scopes.js';
import { refusal } from './refusal.js';

const transcript: Message[] = [
  { role: 'system', content: 'frame' }, // 0
  { role: 'user', content: 'u1', name: 'a' }, // 1
  { role: 'assistant', content: 'a1', name: 'bot' }, // 2
  { role: 'system', content: 'mid-conversation note' }, // 3
  { role: 'user', content: 'u2', name: 'b' }, // 4
  { role: 'assistant', content: null, name: 'bot', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, // 5
  { role: 'tool', content: 'r', tool_call_id: 'c1' }, // 6
  { role: 'assistant', content: 'a2', name: 'bot' }, // 7
  { role: 'user', content: 'u3', name: 'a' }, // 8
  { role: 'assistant', content: 'a3', name: 'bot' }, // 9
];

const indices = (scope: Parameters<typeof scopeIndices>[0]): number[] => [...scopeIndices(scope, transcript)].sort((x, y) => x - y);

describe('lastTurns', () => {
  it('keeps the last n turns, from a user message to the end, and every system message', () => {
    expect(indices(lastTurns(1))).toEqual([0, 3, 8, 9]);
    expect(indices(lastTurns(2))).toEqual([0, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('keeps everything when there are fewer turns than asked', () => {
    expect(indices(lastTurns(3))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(indices(lastTurns(99))).toHaveLength(transcript.length);
  });

  it('keeps only system messages for n = 0', () => {
    expect(indices(lastTurns(0))).toEqual([0, 3]);
  });

  it('refuses to judge one message alone, with a code saying why', () => {
    try {
      lastTurns(1).matches(transcript[0]!, 0);
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'scope/positional')).toBe(true);
    }
  });

  it('refuses a negative or fractional count', () => {
    expect(() => lastTurns(-1)).toThrow(/whole number/);
    expect(() => lastTurns(1.5)).toThrow(/whole number/);
  });
});

describe('since and tagged', () => {
  it('since keeps index >= checkpoint', () => {
    expect(indices(since(7))).toEqual([7, 8, 9]);
    expect(indices(since(0))).toHaveLength(10);
    expect(indices(since(100))).toEqual([]);
  });

  it('tagged keeps one author', () => {
    expect(indices(tagged('a'))).toEqual([1, 8]);
    expect(() => tagged('')).toThrow(/non-empty/);
  });
});

describe('combinators over a positional scope', () => {
  it('allOf(lastTurns(2), tagged(a)) is the intersection', () => {
    expect(indices(allOf(lastTurns(2), tagged('a')))).toEqual([8]);
  });

  it('not(lastTurns(1)) is the complement, system messages included', () => {
    expect(indices(not(lastTurns(1)))).toEqual([1, 2, 4, 5, 6, 7]);
  });

  it('anyOf(lastTurns(1), tagged(b)) is the union', () => {
    expect(indices(anyOf(lastTurns(1), tagged('b')))).toEqual([0, 3, 4, 8, 9]);
  });

  it('nests: not(allOf(not(lastTurns(1)), since(5)))', () => {
    // not(lastTurns(1)) ∩ since(5) = [5, 6, 7]; its complement is everything else.
    expect(indices(not(allOf(not(lastTurns(1)), since(5))))).toEqual([0, 1, 2, 3, 4, 8, 9]);
  });

  it('plain combinators still work through matches()', () => {
    const scope = allOf(since(2), not(tagged('bot')));
    expect(scope.matches(transcript[3]!, 3)).toBe(true);
    expect(scope.matches(transcript[2]!, 2)).toBe(false);
    expect(indices(scope)).toEqual([3, 4, 6, 8]);
  });

  it('identities: allOf() keeps all, anyOf() keeps none', () => {
    expect(indices(allOf())).toHaveLength(10);
    expect(indices(anyOf())).toEqual([]);
  });

  it('applyScope keeps the original order and element type', () => {
    const kept = applyScope(tagged('bot'), transcript);
    expect(kept.map((m) => m.content)).toEqual(['a1', null, 'a2', 'a3']);
  });
});

describe('scope arguments are checked where they are given', () => {
  const list: Message[] = [
    { role: 'user', content: 'a', name: 'ann' },
    { role: 'assistant', content: 'b' },
    { role: 'user', content: 'c', name: 'bob' },
  ];
  const functionWithMatches = Object.assign(() => true, { matches: () => true });

  it.each([
    ['null', () => scopeIndices(null as unknown as ContextScope, list), 'scopeIndices(scope) takes a scope (lastTurns(), since(), tagged(), allOf()…), got null.'],
    ['an object without matches', () => applyScope({} as ContextScope, list), 'applyScope(scope) takes a scope (lastTurns(), since(), tagged(), allOf()…), got an object.'],
    ['matches that is not a function', () => not({ matches: true } as unknown as ContextScope), 'not(scope) takes a scope (lastTurns(), since(), tagged(), allOf()…), got an object.'],
    ['a function', () => scopeIndices(functionWithMatches as unknown as ContextScope, list), 'scopeIndices(scope) takes a scope (lastTurns(), since(), tagged(), allOf()…), got a function.'],
    ['a bad allOf() argument, by position', () => allOf(tagged('a'), 5 as unknown as ContextScope), 'allOf() argument 1 takes a scope (lastTurns(), since(), tagged(), allOf()…), got 5.'],
    ['a bad anyOf() argument, by position', () => anyOf(undefined as unknown as ContextScope), 'anyOf() argument 0 takes a scope (lastTurns(), since(), tagged(), allOf()…), got undefined.'],
    ['a list that is not an array', () => scopeIndices(since(0), new Set(list) as unknown as Message[]), 'A scope resolves over an array of messages, got an instance of Set.'],
    ['a negative lastTurns count', () => lastTurns(-1), 'lastTurns(n) must be a whole number ≥ 0, got -1.'],
    ['a fractional since index', () => since(0.5), 'since(index) must be a whole number ≥ 0, got 0.5.'],
    ['an empty author name', () => tagged(''), 'tagged(name) needs a non-empty author name.'],
    ['an author name that is not a string', () => tagged(7 as unknown as string), 'tagged(name) needs a non-empty author name.'],
  ])('refuses %s with argument/invalid', (_label, run, message) => {
    const error = refusal(run);
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe(message);
  });

  it('lastTurns says how to resolve it when asked about one message', () => {
    const error = refusal(() => lastTurns(1).matches(list[0]!, 0));
    expect(error.code).toBe('scope/positional');
    expect(error.message).toBe('lastTurns() depends on the whole list and cannot judge one message; resolve it with scopeIndices() or slice().');
  });

  it('plain anyOf and allOf judge one message through matches()', () => {
    const either = anyOf(tagged('bob'), since(1));
    expect(list.map((message, index) => either.matches(message, index))).toEqual([false, true, true]);
    const both = allOf(tagged('bob'), since(1));
    expect(list.map((message, index) => both.matches(message, index))).toEqual([false, false, true]);
    expect([...scopeIndices(either, list)]).toEqual([1, 2]);
  });

  it('allOf keeps only indices of the list, even when a custom positional scope names more', () => {
    const wild: ContextScope = { matches: () => true, survivingIndices: (messages) => new Set([0, messages.length, messages.length + 1]) };
    expect([...scopeIndices(allOf(wild, wild), list)]).toEqual([0]);
  });

  it('lastTurns skips the holes of a sparse list', () => {
    const sparse: Message[] = [];
    sparse[1] = { role: 'user', content: 'a' };
    sparse[2] = { role: 'assistant', content: 'b' };
    expect([...scopeIndices(lastTurns(2), sparse)].sort()).toEqual([1, 2]);
    expect([...scopeIndices(lastTurns(1), sparse)].sort()).toEqual([1, 2]);
  });
});
