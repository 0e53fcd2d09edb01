import { describe, expect, it } from 'vitest';
import { PrefixContext, isTabulaError } from '../../../src/core/index.js';
import { refusal } from './refusal.js';

describe('PrefixContext', () => {
  it('lists system prompt, grounding and schema block in order, in a new array each call', () => {
    const prefix = new PrefixContext({
      systemPrompt: 'You are terse.',
      grounding: [{ role: 'user', content: 'Docs: …' }],
      schemaBlock: 'Reply as JSON.',
    });
    const messages = prefix.asMessages();
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['system', 'You are terse.'],
      ['user', 'Docs: …'],
      ['system', 'Reply as JSON.'],
    ]);
    expect(prefix.asMessages()).not.toBe(messages);
    messages.pop();
    expect(prefix.asMessages()).toHaveLength(3);
  });

  it('omits an empty system prompt and an absent schema block', () => {
    expect(new PrefixContext().asMessages()).toEqual([]);
    expect(new PrefixContext({ grounding: [{ role: 'system', content: 'g' }] }).asMessages()).toHaveLength(1);
  });

  it('is frozen, with frozen grounding', () => {
    const grounding = [{ role: 'user' as const, content: 'a' }];
    const prefix = new PrefixContext({ grounding });
    grounding.push({ role: 'user', content: 'b' });
    expect(prefix.grounding).toHaveLength(1);
    expect(Object.isFrozen(prefix)).toBe(true);
    expect(() => {
      (prefix as { systemPrompt: string }).systemPrompt = 'x';
    }).toThrow(TypeError);
    expect(Object.isFrozen(prefix.grounding[0])).toBe(true);
  });

  it('compares structurally', () => {
    const a = new PrefixContext({ systemPrompt: 's', grounding: [{ role: 'user', content: 'g', name: 'n' }] });
    const b = new PrefixContext({ systemPrompt: 's', grounding: [{ name: 'n', content: 'g', role: 'user' }] });
    expect(a.equals(b)).toBe(true);
    expect(a.key()).toBe(b.key());
    expect(a.equals(new PrefixContext({ systemPrompt: 's' }))).toBe(false);
    expect(new PrefixContext({ schemaBlock: '' }).equals(new PrefixContext())).toBe(false);
  });

  it('refuses an invalid grounding message, naming it', () => {
    try {
      new PrefixContext({ grounding: [{ role: 'user', content: 'ok' }, { role: 'tool', content: 'x' } as never] });
      expect.unreachable();
    } catch (error) {
      expect(isTabulaError(error, 'schema/invalid')).toBe(true);
      expect((error as Error).message).toMatch(/PrefixContext grounding\[1\].*tool_call_id/);
    }
  });
});

describe('PrefixContext refusals', () => {

  it.each([
    ['a string as init', () => new PrefixContext('be brief' as unknown as object), 'new PrefixContext(init) takes an options object or nothing, got "be brief".'],
    ['a systemPrompt that is not a string', () => new PrefixContext({ systemPrompt: 3 as unknown as string }), 'PrefixContext: systemPrompt must be a string.'],
    ['a schemaBlock that is not a string or null', () => new PrefixContext({ schemaBlock: {} as unknown as string }), 'PrefixContext: schemaBlock must be a string or null.'],
    ['grounding that is not iterable', () => new PrefixContext({ grounding: 1 as unknown as [] }), 'PrefixContext grounding takes an array (or another iterable), got 1.'],
    ['equals() with a plain object', () => new PrefixContext().equals({ systemPrompt: '' } as unknown as PrefixContext), 'prefix.equals(other) compares with a PrefixContext, got an object.'],
  ])('refuses %s, naming it', (_label, run, message) => {
    const error = refusal(run);
    expect(error.code).toBe('argument/invalid');
    expect(error.message).toBe(message);
  });

  it('takes a schemaBlock of null or a string', () => {
    expect(new PrefixContext({ schemaBlock: null }).asMessages()).toEqual([]);
    expect(new PrefixContext({ schemaBlock: '' }).asMessages()).toEqual([{ role: 'system', content: '' }]);
  });
});
