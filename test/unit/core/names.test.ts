import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { fcParams } from '../seed.js';
import { ID_MAX_LENGTH, KEY_MAX_LENGTH, checkName, findNameProblem, nameSchema } from '../../../src/core/names.js';
import { refusal } from './refusal.js';

describe('names', () => {
  it('accepts 1 to max code units of well-formed text', () => {
    expect(findNameProblem('a', 4)).toBeNull();
    expect(findNameProblem('abcd', 4)).toBeNull();
    expect(findNameProblem('😀', 2)).toBeNull();
    expect(checkName('x'.repeat(ID_MAX_LENGTH), 'userId')).toBe('x'.repeat(ID_MAX_LENGTH));
    expect(checkName('k'.repeat(KEY_MAX_LENGTH), 'memory key', KEY_MAX_LENGTH)).toBe('k'.repeat(KEY_MAX_LENGTH));
  });

  it.each([
    ['null', null, 'expected a string, got null'],
    ['an array', ['a'], 'expected a string, got an array'],
    ['a number', 7, 'expected a string, got number'],
    ['undefined', undefined, 'expected a string, got undefined'],
    ['an object', { id: 'a' }, 'expected a string, got object'],
    ['an empty string', '', 'expected 1–4 characters, got 0'],
    ['one code unit too many', 'abcde', 'expected 1–4 characters, got 5'],
    ['a lone high surrogate', 'a\ud800', 'contains a lone UTF-16 surrogate, which is not valid Unicode text'],
    ['a lone low surrogate', '\udc00a', 'contains a lone UTF-16 surrogate, which is not valid Unicode text'],
    ['NUL', 'a\u0000b', 'contains U+0000 (NUL), which a sync server on PostgreSQL cannot store'],
  ])('refuses %s and says why', (_label, value, problem) => {
    expect(findNameProblem(value, 4)).toBe(problem);
    const error = refusal(() => checkName(value, 'sessionId', 4));
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe(`sessionId must be a string of 1–4 characters of valid Unicode: ${problem}.`);
    if (typeof value === 'string') {
      const result = nameSchema(4).safeParse(value);
      expect(result.error?.issues).toMatchObject([{ code: 'custom', path: [], message: problem }]);
    }
  });

  it('checkName, findNameProblem and nameSchema agree on any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 6 }), fc.integer({ min: 1, max: 5 }), (value, max) => {
        const problem = findNameProblem(value, max);
        expect(nameSchema(max).safeParse(value).success).toBe(problem === null);
        if (problem === null) expect(checkName(value, 'id', max)).toBe(value);
        else expect(() => checkName(value, 'id', max)).toThrow(problem);
      }),
      fcParams(300),
    );
  });

  it('defaults to ID_MAX_LENGTH', () => {
    expect(nameSchema().safeParse('x'.repeat(ID_MAX_LENGTH)).success).toBe(true);
    expect(nameSchema().safeParse('x'.repeat(ID_MAX_LENGTH + 1)).success).toBe(false);
    expect(() => checkName('x'.repeat(ID_MAX_LENGTH + 1), 'userId')).toThrow(`expected 1–${ID_MAX_LENGTH} characters, got ${ID_MAX_LENGTH + 1}`);
  });
});
