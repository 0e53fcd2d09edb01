/**
 * Scopes pick which messages of a transcript a view keeps: the last turns,
 * everything since a checkpoint, one author's messages, and any boolean
 * combination of those.
 *
 * Some scopes cannot decide from one message and its index: "the last two
 * turns" depends on where the list ends. Such positional scopes implement
 * `survivingIndices`, and every combinator here implements it too, so
 * `allOf(lastTurns(2), tagged('a'))` and `not(lastTurns(1))` are exact.
 * Always resolve a scope with {@link scopeIndices}, never by calling
 * `matches` in a loop.
 */
import { describeValue } from './args.js';
import { TabulaError } from './errors.js';
import type { Message } from './message.js';

/** A predicate over the messages of a list. */
export interface ContextScope {
  /** Whether the message at `index` (its index in the full list) belongs to the view. */
  matches(message: Message, index: number): boolean;
  /** Scopes that depend on the end of the list implement this; slice() uses it. */
  survivingIndices?(messages: readonly Message[]): ReadonlySet<number>;
}

/** Returns `value` as a scope, or throws `argument/invalid` naming `what` (a scope has a `matches` function). */
export function requireScope(value: unknown, what: string): ContextScope {
  const candidate = value as Partial<ContextScope> | null;
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.matches !== 'function') {
    throw new TabulaError('argument/invalid', `${what} takes a scope (lastTurns(), since(), tagged(), allOf()…), got ${describeValue(value)}.`);
  }
  return candidate as ContextScope;
}

/** The indices of `messages` that `scope` keeps. */
export function scopeIndices(scope: ContextScope, messages: readonly Message[]): ReadonlySet<number> {
  requireScope(scope, 'scopeIndices(scope)');
  if (!Array.isArray(messages)) throw new TabulaError('argument/invalid', `A scope resolves over an array of messages, got ${describeValue(messages)}.`);
  if (scope.survivingIndices) return scope.survivingIndices(messages);
  const kept = new Set<number>();
  messages.forEach((message: Message, index: number) => {
    if (scope.matches(message, index)) kept.add(index);
  });
  return kept;
}

/** The messages that `scope` keeps, in their original order. */
export function applyScope<M extends Message>(scope: ContextScope, messages: readonly M[]): M[] {
  const kept = scopeIndices(requireScope(scope, 'applyScope(scope)'), messages);
  return messages.filter((_, index) => kept.has(index));
}

function requireCount(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new TabulaError('argument/invalid', `${what} must be a whole number ≥ 0, got ${describeValue(value)}.`);
  }
}

/**
 * The last `n` turns. A turn starts at a user message and runs up to the
 * next one; when there are fewer than `n` user messages, everything is kept.
 * System messages always survive: they frame the conversation.
 */
export function lastTurns(n: number): ContextScope {
  requireCount(n, 'lastTurns(n)');
  return {
    matches() {
      throw new TabulaError(
        'scope/positional',
        'lastTurns() depends on the whole list and cannot judge one message; resolve it with scopeIndices() or slice().',
      );
    },
    survivingIndices(messages) {
      let start = 0;
      let seen = 0;
      for (let index = messages.length - 1; index >= 0; index--) {
        if (messages[index]?.role !== 'user') continue;
        seen++;
        if (seen === n) {
          start = index;
          break;
        }
      }
      // n = 0 keeps no turn at all; fewer than n user messages keeps every turn.
      if (n === 0) start = messages.length;
      const kept = new Set<number>();
      messages.forEach((message, index) => {
        if (index >= start || message.role === 'system') kept.add(index);
      });
      return kept;
    },
  };
}

/** Messages at index `index` and after: everything since a checkpoint. */
export function since(index: number): ContextScope {
  requireCount(index, 'since(index)');
  return { matches: (_message, at) => at >= index };
}

/** Messages whose `name` is `name`: one author's share of a team transcript. */
export function tagged(name: string): ContextScope {
  if (typeof name !== 'string' || name === '') {
    throw new TabulaError('argument/invalid', 'tagged(name) needs a non-empty author name.');
  }
  return { matches: (message) => message.name === name };
}

function isPositional(scopes: readonly ContextScope[]): boolean {
  return scopes.some((scope) => scope.survivingIndices !== undefined);
}

/** Messages every scope keeps. `allOf()` keeps everything. */
export function allOf(...scopes: ContextScope[]): ContextScope {
  scopes.forEach((scope, index) => requireScope(scope, `allOf() argument ${index}`));
  const matches = (message: Message, index: number): boolean => scopes.every((scope) => scope.matches(message, index));
  return {
    matches,
    survivingIndices(messages) {
      if (!isPositional(scopes)) return scopeIndices({ matches }, messages);
      const sets = scopes.map((scope) => scopeIndices(scope, messages));
      const kept = new Set<number>();
      for (let index = 0; index < messages.length; index++) {
        if (sets.every((set) => set.has(index))) kept.add(index);
      }
      return kept;
    },
  };
}

/** Messages any scope keeps. `anyOf()` keeps nothing. */
export function anyOf(...scopes: ContextScope[]): ContextScope {
  scopes.forEach((scope, index) => requireScope(scope, `anyOf() argument ${index}`));
  const matches = (message: Message, index: number): boolean => scopes.some((scope) => scope.matches(message, index));
  return {
    matches,
    survivingIndices(messages) {
      if (!isPositional(scopes)) return scopeIndices({ matches }, messages);
      const kept = new Set<number>();
      for (const scope of scopes) for (const index of scopeIndices(scope, messages)) kept.add(index);
      return kept;
    },
  };
}

/** Messages the scope does not keep. */
export function not(scope: ContextScope): ContextScope {
  requireScope(scope, 'not(scope)');
  return {
    matches: (message, index) => !scope.matches(message, index),
    survivingIndices(messages) {
      const excluded = scopeIndices(scope, messages);
      const kept = new Set<number>();
      for (let index = 0; index < messages.length; index++) if (!excluded.has(index)) kept.add(index);
      return kept;
    },
  };
}
