/**
 * The class behind "acknowledged, then stored without its `__proto__` key": a validator that
 * accepts an op but returns something else (a key dropped, a value coerced). The server stores
 * what the schema returns and the pushing device keeps what it sent, so any such difference is a
 * silent divergence. Property: for valid ops of every kind, mutated anywhere with own `__proto__`
 * keys (as `JSON.parse` makes them), unknown keys and random JSON, `parseOp` either refuses the
 * op or returns a value equal to its input.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isTabulaError, makeOp, parseOp, type CheckpointSnapshot, type Message, type Op } from '../../../src/core/index.js';
import { plainEqual } from '../../../src/core/json.js';
import { fcParams } from '../seed.js';

const order = '001700000000000.000000.client';
const base = { id: 'o1', userId: 'u', sessionId: 's', order, after: '' };
const message: Message = { role: 'assistant', content: 'hi', tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } }] };
const snapshot: CheckpointSnapshot = {
  prefix: { systemPrompt: 'p', grounding: [{ role: 'user', content: 'g' }], schemaBlock: null },
  state: { summary: null, tasks: { a: [1] }, plan: null, permissions: null, tools: ['x'], context: { k: { deep: true } } },
  messages: [{ id: 'm1', order, createdAt: 1, status: 'complete', message: { role: 'user', content: 'q' } }],
};

/** One valid op of every kind, each with nested objects where its schema allows them. */
const VALID: Op[] = [
  makeOp('session.create', { ...base, body: { createdAt: 1, forkOf: { sessionId: 'a', userId: 'u' } } }),
  makeOp('session.delete', { ...base, body: {} }),
  makeOp('session.clear', { ...base, body: {} }),
  makeOp('message.append', { ...base, body: { id: 'm1', createdAt: 1, status: 'complete', message } }),
  makeOp('message.update', { ...base, body: { id: 'm1', status: 'streaming', message, order, createdAt: 1 } }),
  makeOp('prefix.set', { ...base, body: { prefix: snapshot.prefix } }),
  makeOp('state.save', { ...base, body: { version: 2, patch: { ...snapshot.state } } }),
  makeOp('journal.append', { ...base, body: { entries: [{ a: { b: 1 } }, [1, 'x'], null] } }),
  makeOp('journal.commit', { ...base, body: { watermark: 1, through: order } }),
  makeOp('note.add', { ...base, body: { text: 't', runId: null, scope: null, at: 1 } }),
  makeOp('memory.set', { ...base, body: { scope: 'user', key: 'k', value: { nested: { v: [1, 2] } } } }),
  makeOp('memory.delete', { ...base, body: { scope: 'user', key: 'k' } }),
  makeOp('checkpoint.create', { ...base, body: { id: 'c1', label: null, at: 1, snapshot } }),
  makeOp('checkpoint.restore', { ...base, body: { id: 'c1', version: 1 } }),
  makeOp('message.remove', { ...base, body: { id: 'm1' } }),
];

/** Every object and array inside `value` (itself included), for a mutation to pick from. */
function containers(value: unknown, found: (Record<string, unknown> | unknown[])[] = []): (Record<string, unknown> | unknown[])[] {
  if (typeof value !== 'object' || value === null) return found;
  found.push(value as Record<string, unknown> | unknown[]);
  for (const child of Object.values(value)) containers(child, found);
  return found;
}

type Mutation = { at: number; kind: 'proto' | 'extra' | 'replace'; key: string; value: unknown };

const json = fc.jsonValue({ maxDepth: 3 });
const mutation: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom('proto' as const, 'extra' as const, 'replace' as const),
  key: fc.oneof(fc.constantFrom('__proto__', 'constructor', 'toString', 'kind', 'body', 'context'), fc.string({ maxLength: 6 })),
  value: json,
});

/** A deep copy of `op` through JSON text (as the server receives it), with the mutations applied. */
function mutated(op: Op, mutations: readonly Mutation[]): unknown {
  const copy = JSON.parse(JSON.stringify(op)) as unknown;
  for (const { at, kind, key, value } of mutations) {
    const all = containers(copy);
    const target = all[at % all.length]!;
    if (Array.isArray(target)) {
      if (target.length > 0 && kind === 'replace') target[at % target.length] = value;
      else target.push(value);
      continue;
    }
    const keys = Object.keys(target);
    if (kind === 'replace' && keys.length > 0) target[keys[at % keys.length]!] = value;
    // An own enumerable `__proto__`, exactly what JSON.parse builds from `{"__proto__": …}`.
    else Object.defineProperty(target, kind === 'proto' ? '__proto__' : key, { value, enumerable: true, writable: true, configurable: true });
  }
  return copy;
}

describe('parseOp returns what it was given, or refuses it', () => {
  it('accepts every valid op unchanged', () => {
    for (const op of VALID) expect(plainEqual(parseOp(JSON.parse(JSON.stringify(op))), op)).toBe(true);
  });

  it('refuses `__proto__` in a state context and as a memory key (both were accepted and stored without it)', () => {
    const save = JSON.parse(JSON.stringify(VALID[6])) as { body: { patch: { context: Record<string, unknown> } } };
    save.body.patch.context = JSON.parse('{"__proto__": {"a": 1}, "b": 2}') as Record<string, unknown>;
    expect(() => parseOp(save)).toThrow(/body\.patch\.context\.__proto__/);
    const set = { ...VALID[10]!, body: { scope: 'user', key: '__proto__', value: 1 } };
    expect(() => parseOp(set)).toThrow(/body\.key/);
  });

  it('for any mutation of any op: a refusal, or a parsed op equal to the input', () => {
    fc.assert(
      fc.property(fc.constantFrom(...VALID), fc.array(mutation, { minLength: 1, maxLength: 4 }), (op, mutations) => {
        const input = mutated(op, mutations);
        let parsed: Op;
        try {
          parsed = parseOp(input);
        } catch (error) {
          expect(isTabulaError(error, 'schema/invalid')).toBe(true);
          return;
        }
        expect(plainEqual(parsed, input)).toBe(true);
        expect(JSON.parse(JSON.stringify(parsed))).toEqual(JSON.parse(JSON.stringify(input)));
      }),
      fcParams(2000),
    );
  });
});
