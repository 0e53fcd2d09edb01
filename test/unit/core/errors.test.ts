import { describe, expect, it } from 'vitest';
import { TabulaError, isTabulaError } from '../../../src/core/index.js';
import { assertNever, describeIssues, formatPath } from '../../../src/core/errors.js';

describe('TabulaError', () => {
  it('carries a code, a cause and untouched issues', () => {
    const cause = new Error('disk');
    const issues = [{ path: ['a'], message: 'bad' }];
    const error = new TabulaError('storage/failed', 'Could not write.', { cause, issues });
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('TabulaError');
    expect(error.code).toBe('storage/failed');
    expect(error.cause).toBe(cause);
    expect(error.issues).toEqual(issues);
  });

  it('is recognised by code after a structured clone, where instanceof fails', () => {
    const original = new TabulaError('run/busy', 'Busy.');
    const cloned: unknown = JSON.parse(JSON.stringify({ name: original.name, code: original.code, message: original.message }));
    expect(cloned instanceof TabulaError).toBe(false);
    expect(isTabulaError(cloned)).toBe(true);
    expect(isTabulaError(cloned, 'run/busy')).toBe(true);
    expect(isTabulaError(cloned, 'run/stale')).toBe(false);
    expect(isTabulaError(new Error('x'))).toBe(false);
    expect(isTabulaError(null)).toBe(false);
  });

  it('formats paths and issues for people', () => {
    expect(formatPath(['tool_calls', 0, 'function', 'name'])).toBe('tool_calls[0].function.name');
    expect(formatPath([])).toBe('(root)');
    expect(describeIssues([{ path: ['a', 1], message: 'expected string' }, { path: [], message: 'x' }])).toBe(
      'a[1]: expected string; (root): x',
    );
  });
});

describe('isTabulaError', () => {
  it.each([
    ['a string', 'TabulaError'],
    ['undefined', undefined],
    ['a TabulaError-named object without a code', { name: 'TabulaError' }],
    ['a TabulaError-named object with a numeric code', { name: 'TabulaError', code: 5 }],
    ['another error with a string code', { name: 'Error', code: 'run/busy' }],
    ['a function named TabulaError', Object.assign(function TabulaError() {}, { code: 'run/busy' })],
  ])('refuses %s', (_label, value) => {
    expect(isTabulaError(value)).toBe(false);
    expect(isTabulaError(value, 'run/busy')).toBe(false);
  });

  it('accepts a real one with or without the code asked for', () => {
    const error = new TabulaError('run/busy', 'Busy.');
    expect(isTabulaError(error)).toBe(true);
    expect(isTabulaError(error, 'run/busy')).toBe(true);
    expect(isTabulaError(error, 'run/stale')).toBe(false);
  });
});

describe('assertNever', () => {
  function shown(value: unknown): string {
    try {
      assertNever(value as never, 'op kind');
    } catch (error) {
      expect(isTabulaError(error, 'argument/invalid')).toBe(true);
      return (error as Error).message;
    }
    throw new Error('assertNever returned');
  }

  it('throws argument/invalid naming what was unknown, whatever the value', () => {
    expect(shown({ kind: 'teleport' })).toBe('Unknown op kind: {"kind":"teleport"}.');
    expect(shown('teleport')).toBe('Unknown op kind: "teleport".');
    expect(shown(undefined)).toBe('Unknown op kind: undefined.');
    expect(shown(() => 1)).toBe('Unknown op kind: function.');
    expect(shown(1n)).toBe('Unknown op kind: bigint.');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(shown(cyclic)).toBe('Unknown op kind: object.');
  });
});
