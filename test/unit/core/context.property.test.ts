import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// fc.jsonValue() sometimes makes a `__proto__` key, which Tabula refuses everywhere: keep to accepted values.
import { fcParams } from '../seed.js';
import { WorkingContext, allOf, anyOf, lastTurns, not, since, tagged, type ContextScope, type Message } from '../../../src/core/index.js';
import { isJsonValue } from '../../../src/core/json.js';

const names = ['a', 'b', 'c'] as const;

const messageArb: fc.Arbitrary<Message> = fc.oneof(
  fc.record({ role: fc.constantFrom('user' as const, 'assistant' as const, 'system' as const), content: fc.string({ maxLength: 6 }) }),
  fc.record({ role: fc.constant('user' as const), content: fc.string({ maxLength: 6 }), name: fc.constantFrom(...names) }),
  fc.record({
    role: fc.constant('assistant' as const),
    content: fc.constant(null),
    tool_calls: fc.array(
      fc.record({
        id: fc.constantFrom('call_1', 'call_2'),
        type: fc.constant('function' as const),
        function: fc.record({ name: fc.constant('f'), arguments: fc.constantFrom('{}', '{"x":1}') }),
      }),
      { minLength: 1, maxLength: 2 },
    ),
  }),
);

const scratchpadArb = fc.dictionary(fc.constantFrom('k1', 'k2', 'k3', 'k4'), fc.jsonValue({ maxDepth: 2 }).filter(isJsonValue));

const contextArb = fc
  .record({ messages: fc.array(messageArb, { maxLength: 12 }), scratchpad: scratchpadArb })
  .map(({ messages, scratchpad }) => new WorkingContext({ messages, scratchpad: scratchpad }));

const scopeArb: fc.Arbitrary<ContextScope> = fc.letrec<{ scope: ContextScope }>((tie) => ({
  scope: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.nat({ max: 4 }).map((n) => lastTurns(n)),
    fc.nat({ max: 12 }).map((i) => since(i)),
    fc.constantFrom(...names).map((n) => tagged(n)),
    fc.array(tie('scope'), { maxLength: 3 }).map((scopes) => allOf(...scopes)),
    fc.array(tie('scope'), { maxLength: 3 }).map((scopes) => anyOf(...scopes)),
    tie('scope').map((scope) => not(scope)),
  ),
})).scope;

describe('context algebra (properties)', () => {
  it('a fork is independent of its source', () => {
    fc.assert(
      fc.property(contextArb, messageArb, fc.jsonValue().filter(isJsonValue), (ctx, extra, value) => {
        const before = ctx.freeze();
        const fork = ctx.fork();
        expect(fork.freeze().equals(before)).toBe(true);
        fork.append(extra);
        fork.set('k1', value);
        fork.delete('k2');
        fork.journal.record('x');
        const k3 = fork.get('k3');
        if (Array.isArray(k3)) k3.push(1);
        else if (k3 !== null && typeof k3 === 'object') k3['mutated'] = true;
        expect(ctx.freeze().equals(before)).toBe(true);
      }),
      fcParams(100),
    );
  });

  it('a.diff(a) is empty', () => {
    fc.assert(
      fc.property(contextArb, (ctx) => {
        const diff = ctx.diff(ctx);
        expect(diff.messagesAdded).toEqual([]);
        expect(diff.messagesRemoved).toEqual([]);
        expect(diff.scratchpadChanges).toEqual({});
        expect(diff.prefixChanged).toBe(false);
      }),
      fcParams(100),
    );
  });

  it("merging a fork's additions back (concat) gives the fork's messages", () => {
    fc.assert(
      fc.property(contextArb, fc.array(messageArb, { maxLength: 8 }), (ctx, additions) => {
        const fork = ctx.fork();
        fork.extend(additions);
        const added = new WorkingContext({ messages: fork.diff(ctx).messagesAdded });
        ctx.merge(added);
        expect(ctx.messages).toEqual(fork.messages);
      }),
      fcParams(100),
    );
  });

  it('union merge is idempotent', () => {
    fc.assert(
      fc.property(contextArb, contextArb, (a, b) => {
        a.merge(b, { mode: 'union' });
        const once = a.freeze();
        a.merge(b, { mode: 'union' });
        expect(a.freeze().equals(once)).toBe(true);
      }),
      fcParams(100),
    );
  });

  it('slice(anyOf(s, not(s))) keeps everything, slice(allOf(s, not(s))) nothing', () => {
    fc.assert(
      fc.property(contextArb, scopeArb, (ctx, scope) => {
        expect(ctx.slice(anyOf(scope, not(scope))).messages).toEqual(ctx.messages);
        expect(ctx.slice(allOf(scope, not(scope))).messages).toEqual([]);
      }),
      fcParams(100),
    );
  });

  it('freeze().equals() agrees with diff emptiness and key()', () => {
    fc.assert(
      fc.property(contextArb, contextArb, (a, b) => {
        const diff = a.diff(b);
        const same =
          diff.messagesAdded.length === 0 &&
          diff.messagesRemoved.length === 0 &&
          Object.keys(diff.scratchpadChanges).length === 0 &&
          JSON.stringify(a.messages) === JSON.stringify(b.messages);
        expect(a.freeze().equals(b.freeze())).toBe(same);
        expect(a.freeze().key() === b.freeze().key()).toBe(same);
      }),
      fcParams(100),
    );
  });
});
