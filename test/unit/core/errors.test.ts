import { describe, expect, it } from 'vitest';
import { TabulaError, describeIssues, formatPath, isTabulaError } from '../../../src/core/index.js';

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
