import { describe, expect, it } from 'vitest';
import {
  ApproxTokenCounter,
  MutationJournal,
  PrefixContext,
  WorkingContext,
  fromFrozenData,
  isTabulaError,
  lastTurns,
  tagged,
  toFrozenData,
  type Message,
  type TokenCounter,
} from '../../../src/core/index.js';
import { refusal } from './refusal.js';

const user = (content: string, name?: string): Message => (name ? { role: 'user', content, name } : { role: 'user', content });
const assistant = (content: string): Message => ({ role: 'assistant', content });
const toolCall = (id: string, args: string): Message => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name: 'search', arguments: args } }],
});

describe('WorkingContext basics', () => {
  it('validates appended messages and refuses a bad one naming its field', () => {
    const ctx = new WorkingContext();
    ctx.append(user('hi'));
    try {
      ctx.append({ role: 'user', content: 42 } as unknown as Message);
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toMatch(/index 1.*content/);
      expect((error as { issues: { path: unknown[] }[] }).issues[0]?.path).toEqual(['content']);
    }
    expect(ctx.messages).toHaveLength(1);
  });

  it('extend() is all or nothing', () => {
    const ctx = new WorkingContext({ messages: [user('a')] });
    expect(() => ctx.extend([user('b'), { role: 'tool', content: 'x' }])).toThrow(/index 2/);
    expect(ctx.messages).toHaveLength(1);
  });

  it('exposes messages as a frozen array of frozen messages', () => {
    const ctx = new WorkingContext({ messages: [user('a')] });
    expect(Object.isFrozen(ctx.messages)).toBe(true);
    expect(Object.isFrozen(ctx.messages[0])).toBe(true);
    const before = ctx.messages;
    ctx.append(user('b'));
    expect(before).toHaveLength(1);
    expect(ctx.messages).toHaveLength(2);
  });

  it('keeps a last-write-wins scratchpad of JSON values', () => {
    const ctx = new WorkingContext({ scratchpad: { plan: 'a' } });
    ctx.set('plan', 'b');
    ctx.update({ step: 1, done: false });
    ctx.delete('done');
    expect(ctx.scratchpad()).toEqual({ plan: 'b', step: 1 });
    expect(Object.isFrozen(ctx.scratchpad())).toBe(true);
    expect(ctx.get('missing')).toBeUndefined();
  });

  it('refuses non-JSON scratchpad values and update() sets nothing then', () => {
    const ctx = new WorkingContext();
    expect(() => ctx.set('when', new Date() as never)).toThrow(/scratchpad key "when".*Date/);
    expect(() => ctx.update({ ok: 1, bad: { n: NaN } })).toThrow(/"bad".*at n, NaN/);
    expect(ctx.scratchpad()).toEqual({});
  });

  it('replaces the prefix whole and refuses anything else', () => {
    const ctx = new WorkingContext();
    ctx.prefix = new PrefixContext({ systemPrompt: 'x' });
    expect(ctx.prefix.systemPrompt).toBe('x');
    expect(() => {
      ctx.prefix = { systemPrompt: 'y' } as PrefixContext;
    }).toThrow(/PrefixContext/);
  });

  it('refuses a bad limit', () => {
    expect(() => new WorkingContext({ limit: -1 })).toThrow(/limit/);
    expect(new WorkingContext({ limit: null }).limit).toBeNull();
  });
});

describe('fork', () => {
  it('deep-copies the scratchpad, owns its messages, shares the frozen prefix', () => {
    const prefix = new PrefixContext({ systemPrompt: 'p' });
    const ctx = new WorkingContext({ prefix, messages: [user('a')], scratchpad: { plan: { steps: ['x'] } } });
    const child = ctx.fork();
    expect(child.prefix).toBe(prefix);
    (child.get('plan') as { steps: string[] }).steps.push('y');
    child.append(user('b'));
    expect(ctx.get('plan')).toEqual({ steps: ['x'] });
    expect(ctx.messages).toHaveLength(1);
    expect(child.tokenCounter).toBe(ctx.tokenCounter);
  });

  it('seeds a new journal with the current entries as committed', () => {
    const ctx = new WorkingContext();
    ctx.journal.record('e1');
    const child = ctx.fork();
    expect(child.journal).not.toBe(ctx.journal);
    expect(child.journal.view()).toEqual(['e1']);
    expect(child.journal.diff()).toEqual([]);
    child.journal.record('e2');
    expect(ctx.journal.length).toBe(1);
  });
});

describe('merge', () => {
  it('concat appends, scratchpad last-write-wins, journal entries keep attribution', () => {
    const parent = new WorkingContext({ messages: [user('q')], scratchpad: { a: 1, b: 1 } });
    const child = parent.fork();
    child.append(assistant('answer'));
    child.set('b', 2);
    child.journal.record({ by: 'child', did: 'answer' });
    expect(parent.merge(child)).toBe(parent);
    expect(parent.messages.map((m) => m.content)).toEqual(['q', 'q', 'answer']);
    expect(parent.scratchpad()).toEqual({ a: 1, b: 2 });
    expect(parent.journal.view()).toEqual([{ by: 'child', did: 'answer' }]);
  });

  it('union dedups by value', () => {
    const a = new WorkingContext({ messages: [user('q'), assistant('x')] });
    const b = new WorkingContext({ messages: [user('q'), assistant('y'), assistant('y')] });
    a.merge(b, { mode: 'union' });
    expect(a.messages.map((m) => m.content)).toEqual(['q', 'x', 'y']);
  });

  it('union keeps two tool calls that share a call id but differ in arguments', () => {
    const a = new WorkingContext({ messages: [toolCall('call_1', '{"q":"cats"}')] });
    const b = new WorkingContext({ messages: [toolCall('call_1', '{"q":"dogs"}'), toolCall('call_1', '{"q":"cats"}')] });
    a.merge(b, { mode: 'union' });
    expect(a.messages.map((m) => m.tool_calls?.[0]?.function.arguments)).toEqual(['{"q":"cats"}', '{"q":"dogs"}']);
  });

  it('refuses an unknown mode', () => {
    expect(() => new WorkingContext().merge(new WorkingContext(), { mode: 'zip' as 'concat' })).toThrow(/concat/);
  });
});

describe('slice', () => {
  it('filters only the messages axis', () => {
    const prefix = new PrefixContext({ systemPrompt: 'p' });
    const journal = new MutationJournal(['seed']);
    journal.record('pending');
    const ctx = new WorkingContext({
      prefix,
      journal,
      scratchpad: { k: { v: 1 } },
      messages: [{ role: 'system', content: 's' }, user('u1', 'a'), assistant('a1'), user('u2', 'b'), assistant('a2')],
      limit: 100,
    });
    const sliced = ctx.slice(lastTurns(1));
    expect(sliced.messages.map((m) => m.content)).toEqual(['s', 'u2', 'a2']);
    expect(sliced.prefix).toBe(prefix);
    expect(sliced.get('k')).toBe(ctx.get('k'));
    expect(sliced.journal.view()).toEqual(['seed', 'pending']);
    expect(sliced.journal.diff()).toEqual(['pending']);
    expect(sliced.limit).toBe(100);
    sliced.set('new', 1);
    expect(ctx.get('new')).toBeUndefined();
    expect(ctx.slice(tagged('a')).messages).toHaveLength(1);
  });
});

describe('diff', () => {
  it('reports this minus other on messages, scratchpad and prefix', () => {
    const base = new WorkingContext({ messages: [user('a'), user('b')], scratchpad: { keep: 1, change: 1, drop: 1 } });
    const next = base.fork();
    next.append(assistant('c'));
    next.set('change', 2);
    next.delete('drop');
    next.set('add', [1]);
    next.prefix = new PrefixContext({ systemPrompt: 'new' });
    const diff = next.diff(base);
    expect(diff.messagesAdded).toEqual([assistant('c')]);
    expect(diff.messagesRemoved).toEqual([]);
    expect(diff.scratchpadChanges).toEqual({ change: 2, drop: null, add: [1] });
    expect(diff.prefixChanged).toBe(true);
    expect(base.diff(next).messagesRemoved).toEqual([assistant('c')]);
  });

  it('counts repeated messages', () => {
    const one = new WorkingContext({ messages: [user('x')] });
    const two = new WorkingContext({ messages: [user('x'), user('x')] });
    expect(two.diff(one).messagesAdded).toEqual([user('x')]);
    expect(one.diff(two).messagesRemoved).toEqual([user('x')]);
  });

  it('is frozen as a whole, scratchpad values included, and detached from the context', () => {
    const a = new WorkingContext({ scratchpad: { plan: { steps: [1] } } });
    const diff = a.diff(new WorkingContext());
    expect(Object.isFrozen(diff)).toBe(true);
    expect(Object.isFrozen(diff.scratchpadChanges)).toBe(true);
    expect(Object.isFrozen((diff.scratchpadChanges.plan as { steps: number[] }).steps)).toBe(true);
    expect(Object.isFrozen(diff.messagesAdded)).toBe(true);
    (a.get('plan') as { steps: number[] }).steps.push(2);
    expect(diff.scratchpadChanges.plan).toEqual({ steps: [1] });
  });
});

describe('freeze', () => {
  it('deep-freezes copied scratchpad values and sorts keys', () => {
    const ctx = new WorkingContext({ scratchpad: { zeta: { n: [1] }, alpha: 'a' } });
    const frozen = ctx.freeze();
    expect(frozen.scratchpad.map(([key]) => key)).toEqual(['alpha', 'zeta']);
    const [, zeta] = frozen.scratchpad[1]!;
    expect(Object.isFrozen((zeta as { n: number[] }).n)).toBe(true);
    (ctx.get('zeta') as { n: number[] }).n.push(2);
    expect(zeta).toEqual({ n: [1] });
    expect(Object.isFrozen(frozen)).toBe(true);
    expect(Object.isFrozen(frozen.messages)).toBe(true);
  });

  it('equality and key() do not depend on insertion order', () => {
    const a = new WorkingContext({ messages: [user('m')] });
    a.set('x', { p: 1, q: 2 });
    a.set('y', 2);
    const b = new WorkingContext({ messages: [user('m')] });
    b.set('y', 2);
    b.set('x', { q: 2, p: 1 });
    expect(a.freeze().equals(b.freeze())).toBe(true);
    expect(a.freeze().key()).toBe(b.freeze().key());
    b.set('y', 3);
    expect(a.freeze().equals(b.freeze())).toBe(false);
  });

  it('includes prefix and journal entries in equality', () => {
    const a = new WorkingContext();
    const b = new WorkingContext({ prefix: new PrefixContext({ systemPrompt: 'p' }) });
    expect(a.freeze().equals(b.freeze())).toBe(false);
    const c = new WorkingContext();
    c.journal.record({ op: 1 });
    expect(a.freeze().equals(c.freeze())).toBe(false);
  });

  it('round-trips through fromFrozen into a live context', () => {
    const ctx = new WorkingContext({
      prefix: new PrefixContext({ systemPrompt: 'p' }),
      messages: [user('a')],
      scratchpad: { plan: { steps: [1] } },
    });
    ctx.journal.record('j');
    const frozen = ctx.freeze();
    const live = WorkingContext.fromFrozen(frozen);
    expect(live.freeze().equals(frozen)).toBe(true);
    live.set('more', true);
    live.append(user('b'));
    expect(frozen.messages).toHaveLength(1);
    expect(() => (live.get('plan') as { steps: number[] }).steps.push(2)).toThrow(TypeError);
  });
});

describe('tokens and limits', () => {
  it('counts prefix and messages through the configured counter', async () => {
    const seen: Message[][] = [];
    const counter: TokenCounter = {
      name: 'spy',
      count: (messages) => {
        seen.push([...messages]);
        return Promise.resolve(messages.length * 10);
      },
    };
    const ctx = new WorkingContext({ prefix: new PrefixContext({ systemPrompt: 'p' }), messages: [user('a'), user('b')], tokenCounter: counter });
    expect(await ctx.tokens()).toBe(30);
    expect(seen[0]?.map((m) => m.content)).toEqual(['p', 'a', 'b']);
  });

  it('assertWithinLimit returns the count or throws context/over-limit', async () => {
    const ctx = new WorkingContext({ messages: [user('x'.repeat(400))], limit: 1000 });
    const tokens = await ctx.assertWithinLimit();
    expect(tokens).toBe(await new ApproxTokenCounter().count(ctx.messages));
    const tight = new WorkingContext({ messages: ctx.messages, limit: 10 });
    await expect(tight.assertWithinLimit()).rejects.toMatchObject({ code: 'context/over-limit' });
    await expect(tight.assertWithinLimit()).rejects.toThrow(/over its limit of 10/);
    await expect(new WorkingContext({ messages: ctx.messages }).assertWithinLimit()).resolves.toBe(tokens);
  });
});

describe('applyLocked', () => {
  it('serialises multi-step async mutations and survives a failing one', async () => {
    const ctx = new WorkingContext();
    const pause = () => new Promise((resolve) => setTimeout(resolve, 5));
    const addPair = (tag: string) => async (c: WorkingContext) => {
      c.append(user(`${tag}-q`));
      await pause();
      c.append(assistant(`${tag}-a`));
      return tag;
    };
    const failing = ctx.applyLocked(async () => {
      await pause();
      throw new Error('step failed');
    });
    const results = await Promise.all([ctx.applyLocked(addPair('one')), ctx.applyLocked(addPair('two')), failing.catch((e: Error) => e.message)]);
    expect(results).toEqual(['one', 'two', 'step failed']);
    expect(ctx.messages.map((m) => m.content)).toEqual(['one-q', 'one-a', 'two-q', 'two-a']);
    expect(await ctx.applyLocked((c) => c.messages.length)).toBe(4);
  });
});

describe('WorkingContext refusals name the call, what it got and what to do', () => {
  it.each([
    ['an array as init', () => new WorkingContext([] as unknown as object), 'new WorkingContext(init) takes an options object or nothing, got an array of 0.'],
    ['messages that are not iterable', () => new WorkingContext({ messages: 3 as unknown as Message[] }), 'WorkingContext messages takes an array (or another iterable), got 3.'],
    ['a scratchpad that is not a plain object', () => new WorkingContext({ scratchpad: new Map() as unknown as Record<string, never> }), 'WorkingContext scratchpad takes a plain object, got an instance of Map.'],
    ['a fractional limit', () => new WorkingContext({ limit: 1.5 }), 'WorkingContext limit must be a whole number of tokens ≥ 0 or null, got 1.5.'],
    ['a negative limit', () => new WorkingContext({ limit: -1 }), 'WorkingContext limit must be a whole number of tokens ≥ 0 or null, got -1.'],
    ['a prefix that is not a PrefixContext', () => new WorkingContext({ prefix: { systemPrompt: 'x' } as unknown as PrefixContext }), 'WorkingContext prefix must be a PrefixContext; build one with new PrefixContext({...}).'],
    ['extend() with a string', () => new WorkingContext().extend('hi' as unknown as Message[]), 'context.extend(messages) takes an array (or another iterable), got "hi".'],
    ['update() with an array', () => new WorkingContext().update([1] as unknown as Record<string, never>), 'context.update(values) takes a plain object, got an array of 1.'],
    ['an empty scratchpad key', () => new WorkingContext().set('', 1), 'A scratchpad key must be a non-empty string, got "".'],
    ['a number as scratchpad key', () => new WorkingContext().set(7 as unknown as string, 1), 'A scratchpad key must be a non-empty string, got 7.'],
    ['merge() with a non-context', () => new WorkingContext().merge({} as WorkingContext), 'context.merge(other) takes a WorkingContext, got an object.'],
    ['merge() with options that are not an object', () => new WorkingContext().merge(new WorkingContext(), 'union' as unknown as object), 'context.merge(other, options) takes an options object or nothing, got "union".'],
    ['merge() with an unknown mode', () => new WorkingContext().merge(new WorkingContext(), { mode: 'zip' as 'union' }), `merge mode must be 'concat' or 'union', got "zip".`],
    ['diff() with null', () => new WorkingContext().diff(null as unknown as WorkingContext), 'context.diff(other) takes a WorkingContext, got null.'],
    ['slice() with a function', () => new WorkingContext().slice((() => true) as unknown as ReturnType<typeof lastTurns>), 'context.slice(scope) takes a scope (lastTurns(), since(), tagged(), allOf()…), got a function.'],
  ])('refuses %s', (_label, run, message) => {
    const error = refusal(run);
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe(message);
  });

  it('refuses "__proto__" as a scratchpad key with schema/invalid, in set, update and init', () => {
    for (const run of [
      () => new WorkingContext().set('__proto__', 1),
      () => new WorkingContext().update(JSON.parse('{"ok": 1, "__proto__": 2}') as Record<string, number>),
      () => new WorkingContext({ scratchpad: JSON.parse('{"__proto__": 2}') as Record<string, number> }),
    ]) {
      const error = refusal(run);
      expect(error.code).toBe('schema/invalid');
      expect(error.message).toMatch(/^scratchpad key: the key "__proto__" is refused/);
    }
  });

  it('names a bad initial message by its index', () => {
    const error = refusal(() => new WorkingContext({ messages: [user('a'), user('b'), { role: 'bot' } as unknown as Message] }));
    expect(error.code).toBe('schema/invalid');
    expect(error.message).toMatch(/^messages\[2\] is not a valid chat message/);
  });

  it('accepts a limit of 0, and a limit equal to the count', async () => {
    expect(new WorkingContext({ limit: 0 }).limit).toBe(0);
    await expect(new WorkingContext({ limit: 0 }).assertWithinLimit()).resolves.toBe(0);
    const ctx = new WorkingContext({ messages: [user('hello there')] });
    const tokens = await ctx.tokens();
    await expect(new WorkingContext({ messages: ctx.messages, limit: tokens }).assertWithinLimit()).resolves.toBe(tokens);
    await expect(new WorkingContext({ messages: ctx.messages, limit: tokens - 1 }).assertWithinLimit()).rejects.toThrow(
      `The context holds ${tokens} tokens (${ctx.tokenCounter.name}), over its limit of ${tokens - 1}; slice it (e.g. lastTurns) or compact older messages into a summary before calling the model.`,
    );
  });
});

describe('WorkingContext: what does not change', () => {
  it('an empty extend or merge keeps the same messages array', () => {
    const ctx = new WorkingContext({ messages: [user('a')] });
    const before = ctx.messages;
    ctx.extend([]);
    expect(ctx.messages).toBe(before);
    ctx.merge(new WorkingContext({ messages: [user('a')] }), { mode: 'union' });
    expect(ctx.messages).toBe(before);
    ctx.extend([user('b')]);
    expect(ctx.messages.map((message) => message.content)).toEqual(['a', 'b']);
    expect(ctx.messages).not.toBe(before);
  });

  it('merging two contexts that share a journal does not copy its entries onto themselves', () => {
    const journal = new MutationJournal(['seed']);
    const a = new WorkingContext({ journal });
    const b = new WorkingContext({ journal });
    journal.record('edit');
    a.merge(b);
    expect(journal.view()).toEqual(['seed', 'edit']);
  });
});

describe('FrozenContext', () => {
  it('equals() refuses what is not a snapshot, naming it', () => {
    const frozen = new WorkingContext().freeze();
    for (const [other, shown] of [
      [null, 'null'],
      [{}, 'an object'],
      [new WorkingContext(), 'an instance of WorkingContext'],
    ] as const) {
      const error = refusal(() => frozen.equals(other as unknown as typeof frozen));
      expect(error.code).toBe('argument/invalid');
      expect(error.message).toBe(`frozen.equals(other) compares with a FrozenContext (from context.freeze()), got ${shown}.`);
    }
  });

  it('a snapshot equals itself even when a journal entry has a cycle no key can describe', () => {
    const entry: Record<string, unknown> = { op: 'set' };
    entry.self = entry;
    const frozen = new WorkingContext({ journal: new MutationJournal([entry]) }).freeze();
    expect(frozen.equals(frozen)).toBe(true);
  });

  it('fromFrozen() refuses what is not a snapshot and points at fromFrozenData', () => {
    const frozen = new WorkingContext().freeze();
    for (const [value, shown] of [
      [null, 'null'],
      [{ ...frozen, key: undefined }, 'an object'],
      [{ ...frozen, prefix: { systemPrompt: '' } }, 'an object'],
      [{ ...frozen, scratchpad: {} }, 'an object'],
    ] as const) {
      const error = refusal(() => WorkingContext.fromFrozen(value as unknown as typeof frozen));
      expect(error.code).toBe('argument/invalid');
      expect(error.message).toBe(
        `WorkingContext.fromFrozen() takes a FrozenContext (from context.freeze()), got ${shown}; for data that crossed a worker use fromFrozenData().`,
      );
    }
  });

  it('a snapshot rebuilt from data with its scratchpad in any order is sorted and equal', () => {
    const keys = ['m', 'c', 'x', 'a', 'q', 'b', 'z', 'k'];
    const ctx = new WorkingContext({ scratchpad: Object.fromEntries(keys.map((key, index) => [key, index])) });
    const data = toFrozenData(ctx.freeze());
    const shuffled = fromFrozenData({ ...data, scratchpad: [...data.scratchpad].reverse() });
    expect(shuffled.scratchpad.map(([key]) => key)).toEqual([...keys].sort());
    expect(shuffled.equals(ctx.freeze())).toBe(true);
  });
});
