/**
 * One list of wrong-type values for every argument test (issue 27): the class-wide tests of the store,
 * the core, the Blackboard and the token counter, and the plain-object check, call their methods with
 * these values. Before, each kept its own list and they had drifted apart (functions only for the
 * board, a message whose content is itself only for the counter, a plain object only for the store).
 * A test takes the whole list and names the kinds a parameter legitimately takes, each with its reason,
 * so a kind added here reaches every test. Each value is made fresh by `make()`: a test may mutate
 * what it is given.
 */

/** The kinds of wrong value, by name (the name appears in a test's failure message). */
export type WrongKind =
  | 'null'
  | 'undefined'
  | 'number'
  | 'NaN'
  | 'string'
  | 'array'
  | 'map'
  | 'date'
  | 'function'
  | 'object'
  | 'cyclic'
  | 'cyclic content'
  | 'deep array'
  | 'deep object';

/** One wrong value: its kind and a function that makes a fresh one. */
export interface WrongValue {
  readonly kind: WrongKind;
  readonly make: () => unknown;
}

/** A nesting far past every depth limit (JSON checks, structured clone, the board's values). */
const DEPTH = 20_000;

function deep(kind: 'array' | 'object'): unknown {
  let value: unknown = 1;
  for (let i = 0; i < DEPTH; i++) value = kind === 'array' ? [value] : { d: value };
  return value;
}

/** Every kind, in a fixed order. */
export const WRONG_VALUES: readonly WrongValue[] = [
  { kind: 'null', make: () => null },
  { kind: 'undefined', make: () => undefined },
  { kind: 'number', make: () => 42 },
  { kind: 'NaN', make: () => Number.NaN },
  { kind: 'string', make: () => 'not-this' },
  // Mixed element types: not a list of messages, of scopes, of journal entries.
  { kind: 'array', make: () => [1, 'two'] },
  // Entries that look like a message's fields: a Map is not a plain object however it is filled.
  { kind: 'map', make: () => new Map([['role', 'user']]) },
  { kind: 'date', make: () => new Date(0) },
  { kind: 'function', make: () => () => 1 },
  // A plain object with keys no parameter takes: wrong where a value or a message is wanted.
  { kind: 'object', make: () => ({ unexpected: true }) },
  {
    // A message whose every field is valid, with a cycle under an extra one: only a check that walks
    // the whole value refuses it.
    kind: 'cyclic',
    make: () => {
      const value: Record<string, unknown> = { role: 'user', content: 'x' };
      value.self = value;
      return value;
    },
  },
  {
    // A message whose content is the message itself: the cycle where a check reads first.
    kind: 'cyclic content',
    make: () => {
      const value: Record<string, unknown> = { role: 'user' };
      value.content = value;
      return value;
    },
  },
  { kind: 'deep array', make: () => deep('array') },
  { kind: 'deep object', make: () => deep('object') },
];

/** Every wrong value but the kinds named (those a parameter legitimately takes). */
export function wrongValuesExcept(...kinds: readonly WrongKind[]): WrongValue[] {
  return WRONG_VALUES.filter((wrong) => !kinds.includes(wrong.kind));
}
