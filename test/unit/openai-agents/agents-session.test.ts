/**
 * TabulaAgentsSession: the SDK's own run() over several turns with a
 * scripted model (and a tool call), Tabula reopened between turns; two
 * instances on one database (two tabs); every history-transaction rule;
 * items deep-equal after a reload; the chat view of the items kept in
 * session.messages() in step with every change.
 */
import { Agent, MemorySession, run, tool, type AgentInputItem } from '@openai/agents-core';
import { ScriptedModel, assistantMessage, functionCall } from '@openai/agents-core/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ApproxTokenCounter, openTabula, type Message, type StoredMessage } from '../../../src/index.js';
import { TabulaAgentsSession, toChatMessages } from '../../../src/openai-agents/index.js';
import { uniqueName } from '../store/helpers.js';
import { fcParams, TEST_SEED } from '../seed.js';

const open = (name: string) => openTabula({ name, tokenCounter: new ApproxTokenCounter() });

/** The text of every message the model was given, in order. */
function inputTexts(input: string | AgentInputItem[]): string[] {
  if (typeof input === 'string') return [input];
  return input.flatMap((item) => {
    if (!('role' in item)) return [`<${item.type}>`];
    if (typeof item.content === 'string') return [item.content];
    return item.content.map((part) => ('text' in part ? part.text : `<${part.type}>`));
  });
}

const user = (text: string): AgentInputItem => ({ role: 'user', content: text });
const assistant = (text: string): AgentInputItem => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] });
const call = (callId: string): AgentInputItem => ({ type: 'function_call', callId, name: 'lookup', arguments: `{"q":"${callId}"}`, status: 'completed' });
const result = (callId: string): AgentInputItem => ({ type: 'function_call_result', callId, name: 'lookup', status: 'completed', output: { type: 'text', text: `found ${callId}` } });
const toolCall = (callId: string) => ({ id: callId, type: 'function' as const, function: { name: 'lookup', arguments: `{"q":"${callId}"}` } });

/** The chat messages of the agents session's Tabula session, without their storage fields. */
async function chatOf(agents: TabulaAgentsSession): Promise<Message[]> {
  const stored = await (await agents.session()).messages();
  return stored.map(({ id: _id, order: _order, status: _status, createdAt: _createdAt, ...message }: StoredMessage) => message);
}
const append = (items: AgentInputItem[]) => ({ type: 'append_items' as const, items });

describe('run(agent, input, { session }) with a scripted model', () => {
  it('keeps every turn, tool call included, across reopening Tabula', async () => {
    const name = uniqueName('agents');
    const weather = tool({
      name: 'weather',
      description: 'Weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: ({ city }) => `sunny in ${city}`,
    });
    const model = new ScriptedModel([
      [assistantMessage('Hello! Where to?')],
      [functionCall('weather', { city: 'Lisbon' }, { callId: 'call-1' })],
      [assistantMessage('It is sunny in Lisbon.')],
      [assistantMessage('You asked about Lisbon.')],
    ]);
    const agent = new Agent({ name: 'planner', instructions: 'Plan trips.', model, tools: [weather] });

    const turn = async (text: string) => {
      const tabula = await open(name);
      try {
        const result = await run(agent, text, { session: new TabulaAgentsSession({ tabula, sessionId: 'trip' }) });
        return result.finalOutput;
      } finally {
        await tabula.close();
      }
    };

    expect(await turn('Hi')).toBe('Hello! Where to?');
    expect(await turn('Weather in Lisbon?')).toBe('It is sunny in Lisbon.');
    expect(await turn('What did I ask?')).toBe('You asked about Lisbon.');

    // The model saw each earlier turn, read back from IndexedDB after a reopen.
    expect(inputTexts(model.calls[1]!.request.input)).toEqual(['Hi', 'Hello! Where to?', 'Weather in Lisbon?']);
    expect(inputTexts(model.calls[2]!.request.input)).toEqual(['Hi', 'Hello! Where to?', 'Weather in Lisbon?', '<function_call>', '<function_call_result>']);
    expect(inputTexts(model.calls[3]!.request.input)).toEqual([
      'Hi',
      'Hello! Where to?',
      'Weather in Lisbon?',
      '<function_call>',
      '<function_call_result>',
      'It is sunny in Lisbon.',
      'What did I ask?',
    ]);
    model.assertComplete();

    const tabula = await open(name);
    const items = await new TabulaAgentsSession({ tabula, sessionId: 'trip' }).getItems();
    expect(items).toHaveLength(8);
    expect(items[4]).toMatchObject({ type: 'function_call_result', callId: 'call-1', output: { type: 'text', text: 'sunny in Lisbon' } });

    // The same conversation in session.messages(), for Tabula's context tools and token counts.
    const agents = new TabulaAgentsSession({ tabula, sessionId: 'trip' });
    const chat = await chatOf(agents);
    expect(chat).toEqual([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello! Where to?' },
      { role: 'user', content: 'Weather in Lisbon?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call-1', type: 'function', function: { name: 'weather', arguments: '{"city":"Lisbon"}' } }] },
      { role: 'tool', tool_call_id: 'call-1', content: 'sunny in Lisbon' },
      { role: 'assistant', content: 'It is sunny in Lisbon.' },
      { role: 'user', content: 'What did I ask?' },
      { role: 'assistant', content: 'You asked about Lisbon.' },
    ]);
    const session = await agents.session();
    expect(await session.messageCount()).toBe(8);
    const tokens = await session.tokens();
    expect(tokens).toBe(await new ApproxTokenCounter().count(chat));
    // A popped item leaves the count too.
    await agents.popItem();
    expect(await session.tokens()).toBe(await new ApproxTokenCounter().count(chat.slice(0, -1)));
    await tabula.close();
  });
});

describe('TabulaAgentsSession items', () => {
  const rich: AgentInputItem[] = [
    { role: 'system', content: 'Be brief.' },
    {
      role: 'user',
      content: [
        { type: 'input_text', text: 'What is on this picture?' },
        { type: 'input_image', image: 'data:image/png;base64,iVBORw0K' },
        { type: 'input_file', file: { id: 'file_1' }, providerData: { detail: 'high' } },
      ],
    },
    { type: 'reasoning', id: 'rs_1', content: [{ type: 'input_text', text: 'thinking' }], providerData: { encrypted: 'abc', nested: { n: [1, null, true] } } },
    { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'A cat.' }] },
    { type: 'function_call', id: 'fc_1', callId: 'call-9', name: 'lookup', arguments: '{"q":"cat"}', status: 'completed' },
    { type: 'function_call_result', callId: 'call-9', name: 'lookup', status: 'completed', output: { type: 'text', text: 'felis' } },
  ];

  it('come back deep-equal after a reload, binary data included', async () => {
    const name = uniqueName('agents');
    const withBytes = { role: 'user', content: [{ type: 'input_file', file: new Uint8Array([0, 1, 2, 250, 255]) }] } as unknown as AgentInputItem;
    let tabula = await open(name);
    await new TabulaAgentsSession({ tabula, sessionId: 's' }).addItems([...rich, withBytes]);
    await tabula.close();
    tabula = await open(name);
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    expect(await session.getItems()).toStrictEqual([...rich, withBytes]);
    expect(await session.getItems(2)).toStrictEqual([rich[5], withBytes]);
    expect(await session.getItems(0)).toEqual([]);
    expect(await session.getSessionId()).toBe('s');
    await tabula.close();
  });

  it('popItem removes the newest; clearSession empties the history', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    expect(await session.popItem()).toBeUndefined();
    await session.addItems([user('a'), user('b')]);
    expect(await session.popItem()).toEqual(user('b'));
    await session.addItems([user('c')]);
    expect(await session.getItems()).toEqual([user('a'), user('c')]);
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    await tabula.close();
  });

  it('refuses what it cannot store, naming the item and field', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    const bad = [user('ok'), { role: 'user', content: 'x', providerData: { at: new Date(0) } } as unknown as AgentInputItem];
    const add = session.addItems(bad);
    await expect(add).rejects.toMatchObject({ code: 'argument/invalid' });
    await expect(add).rejects.toThrow('addItems(items)[1].providerData.at cannot be stored');
    expect(await session.getItems()).toEqual([]);
    await tabula.close();
  });

  it('two instances on one database (two tabs) share one history and lose no concurrent append', async () => {
    const name = uniqueName('agents');
    const [a, b] = [await open(name), await open(name)];
    const [sa, sb] = [new TabulaAgentsSession({ tabula: a, sessionId: 's' }), new TabulaAgentsSession({ tabula: b, sessionId: 's' })];
    await sa.addItems([user('from a')]);
    expect(await sb.getItems()).toEqual([user('from a')]);
    await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? sa : sb).addItems([user(`n${i}`)])));
    const texts = (await sa.getItems()).map((item) => ('content' in item ? item.content : null));
    expect(texts).toHaveLength(11);
    expect(new Set(texts)).toEqual(new Set(['from a', ...Array.from({ length: 10 }, (_, i) => `n${i}`)]));
    // One operation applied from both tabs at once lands once.
    await Promise.all([sa, sb].map((s) => s.applyHistoryTransaction({ operationId: 'op-both', transaction: append([user('once')]) })));
    expect((await sb.getItems()).filter((item) => 'content' in item && item.content === 'once')).toHaveLength(1);
    await Promise.all([a.close(), b.close()]);
  });
});

describe('session.messages() holds the chat view of the items', () => {
  it('follows popItem, replace_suffix and clearSession, in two instances and after a reload', async () => {
    const name = uniqueName('agents');
    const [a, b] = [await open(name), await open(name)];
    const [sa, sb] = [new TabulaAgentsSession({ tabula: a, sessionId: 's' }), new TabulaAgentsSession({ tabula: b, sessionId: 's' })];
    const reasoning = { type: 'reasoning', id: 'rs_1', content: [] } as AgentInputItem;
    await sa.addItems([{ role: 'system', content: 'Be brief.' }, user('q'), reasoning, assistant('let me look'), call('c1'), call('c2')]);
    // Consecutive calls of one turn join the assistant message before them; reasoning has no chat form.
    expect(await chatOf(sb)).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'let me look', tool_calls: [toolCall('c1'), toolCall('c2')] },
    ]);

    expect(await sb.popItem()).toEqual(call('c2'));
    expect((await chatOf(sa)).at(-1)).toEqual({ role: 'assistant', content: 'let me look', tool_calls: [toolCall('c1')] });

    await sa.applyHistoryTransaction({
      operationId: 'op-r',
      transaction: { type: 'replace_suffix', expectedSuffix: [assistant('let me look'), call('c1')], replacement: [call('c3'), result('c3'), assistant('done')] },
    });
    const expected: Message[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'q' },
      { role: 'assistant', content: null, tool_calls: [toolCall('c3')] },
      { role: 'tool', tool_call_id: 'c3', content: 'found c3' },
      { role: 'assistant', content: 'done' },
    ];
    expect(await chatOf(sb)).toEqual(expected);
    expect(await (await sb.session()).messageCount()).toBe(5);
    // A replayed transaction changes neither the items nor the messages.
    await sb.applyHistoryTransaction({
      operationId: 'op-r',
      transaction: { type: 'replace_suffix', expectedSuffix: [assistant('let me look'), call('c1')], replacement: [call('c3'), result('c3'), assistant('done')] },
    });
    expect(await chatOf(sa)).toEqual(expected);

    await Promise.all([a.close(), b.close()]);
    const reopened = await open(name);
    const sr = new TabulaAgentsSession({ tabula: reopened, sessionId: 's' });
    expect(await chatOf(sr)).toEqual(expected);
    expect(toChatMessages(await sr.getItems())).toEqual(expected);
    expect(await sr.getItems()).toStrictEqual([{ role: 'system', content: 'Be brief.' }, user('q'), reasoning, call('c3'), result('c3'), assistant('done')]);

    // clearSession removes the messages that stood for items, and only those.
    await (await sr.session()).append({ role: 'user', content: 'written by the app' });
    await sr.clearSession();
    expect(await chatOf(sr)).toEqual([{ role: 'user', content: 'written by the app' }]);
    expect(await sr.getItems()).toEqual([]);
    await reopened.close();
  });

  it('a failed history transaction leaves the messages as they were', async () => {
    const tabula = await open(uniqueName('agents'));
    const agents = new TabulaAgentsSession({ tabula, sessionId: 's' });
    await agents.addItems([user('a'), assistant('b')]);
    const before = await (await agents.session()).messages();
    const attempt = agents.applyHistoryTransaction({ operationId: 'op-x', transaction: { type: 'replace_suffix', expectedSuffix: [user('zz')], replacement: [user('c')] } });
    await expect(attempt).rejects.toMatchObject({ code: 'session/conflict' });
    expect(await (await agents.session()).messages()).toEqual(before);
    await tabula.close();
  });
});

describe('applyHistoryTransaction', () => {
  it('applies append_items once per operation id', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    await session.applyHistoryTransaction({ operationId: 'op-1', transaction: append([user('a'), user('b')]) });
    await session.applyHistoryTransaction({ operationId: 'op-1', transaction: append([user('a'), user('b')]) });
    expect(await session.getItems()).toEqual([user('a'), user('b')]);
    await tabula.close();
  });

  it('replaces a matching suffix, and applies a repeated replace once', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    await session.addItems([user('a'), user('b'), user('c')]);
    const transaction = { type: 'replace_suffix' as const, expectedSuffix: [user('b'), user('c')], replacement: [user('B')] };
    await session.applyHistoryTransaction({ operationId: 'op-r', transaction });
    await session.applyHistoryTransaction({ operationId: 'op-r', transaction });
    expect(await session.getItems()).toEqual([user('a'), user('B')]);
    await session.addItems([user('d')]);
    expect(await session.getItems()).toEqual([user('a'), user('B'), user('d')]);
    await tabula.close();
  });

  it('fails and changes nothing when the same id comes with a different transaction', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    await session.applyHistoryTransaction({ operationId: 'op-1', transaction: append([user('a')]) });
    const again = session.applyHistoryTransaction({ operationId: 'op-1', transaction: append([user('other')]) });
    await expect(again).rejects.toMatchObject({ code: 'session/conflict' });
    await expect(again).rejects.toThrow('"op-1" of session "s" was already applied with a different transaction');
    const replace = session.applyHistoryTransaction({ operationId: 'op-1', transaction: { type: 'replace_suffix', expectedSuffix: [user('a')], replacement: [] } });
    await expect(replace).rejects.toMatchObject({ code: 'session/conflict' });
    expect(await session.getItems()).toEqual([user('a')]);
    await tabula.close();
  });

  it('fails and changes nothing when the suffix does not match or is longer than the history', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    await session.addItems([user('a'), user('b')]);
    for (const expectedSuffix of [[user('x')], [user('a')], [user('z'), user('a'), user('b')]]) {
      const attempt = session.applyHistoryTransaction({ operationId: 'op-s', transaction: { type: 'replace_suffix', expectedSuffix, replacement: [user('new')] } });
      await expect(attempt).rejects.toMatchObject({ code: 'session/conflict' });
      await expect(attempt).rejects.toThrow('no longer ends with');
    }
    expect(await session.getItems()).toEqual([user('a'), user('b')]);
    // The failed attempts recorded nothing: the id is still free for a transaction that holds.
    await session.applyHistoryTransaction({ operationId: 'op-s', transaction: { type: 'replace_suffix', expectedSuffix: [user('b')], replacement: [user('new')] } });
    expect(await session.getItems()).toEqual([user('a'), user('new')]);
    await tabula.close();
  });

  it('refuses a malformed transaction with a message naming the field', async () => {
    const tabula = await open(uniqueName('agents'));
    const session = new TabulaAgentsSession({ tabula, sessionId: 's' });
    await expect(session.applyHistoryTransaction({ operationId: '', transaction: append([]) })).rejects.toThrow('operationId must be a non-empty string');
    await expect(session.applyHistoryTransaction({ operationId: 'x', transaction: { type: 'nope' } as never })).rejects.toThrow('transaction.type must be');
    await expect(session.applyHistoryTransaction({ operationId: 'x', transaction: { type: 'append_items', items: 'a' } as never })).rejects.toThrow(
      'transaction.items must be an array',
    );
    await tabula.close();
  });
});

describe('TabulaAgentsSession behaves as the SDK MemorySession (seeded model-based test)', () => {
  type Action =
    | { kind: 'add'; texts: string[] }
    | { kind: 'pop' }
    | { kind: 'clear' }
    | { kind: 'append'; op: number; texts: string[] }
    | { kind: 'replace'; op: number; suffix: number; tweak: boolean; texts: string[] }
    | { kind: 'get'; limit: number | undefined };
  // Kinds of item: u = user text, a = assistant text, c = function call, r = its result.
  const texts = fc.array(fc.constantFrom('u', 'a', 'c', 'c', 'r'), { maxLength: 3 });
  const item = (kind: string): AgentInputItem => (kind === 'u' ? user('u') : kind === 'a' ? assistant('a') : kind === 'c' ? call('k') : result('k'));
  const action: fc.Arbitrary<Action> = fc.oneof(
    fc.record({ kind: fc.constant('add' as const), texts }),
    fc.record({ kind: fc.constant('pop' as const) }),
    fc.record({ kind: fc.constant('clear' as const) }),
    fc.record({ kind: fc.constant('append' as const), op: fc.nat(3), texts }),
    fc.record({ kind: fc.constant('replace' as const), op: fc.nat(3), suffix: fc.nat(3), tweak: fc.boolean(), texts }),
    fc.record({ kind: fc.constant('get' as const), limit: fc.option(fc.nat(4), { nil: undefined }) }),
  );

  const seed = TEST_SEED;

  it(`seed ${seed}: same items and same failures for random operation sequences, and messages() = the items' chat view`, async () => {
    console.log(`[agents-session model test] seed ${seed} (replay with TABULA_SEED=${seed})`);
    const tabula = await open(uniqueName('agents'));
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 12 }), async (actions) => {
        round += 1;
        const ours = new TabulaAgentsSession({ tabula, sessionId: `m${round}` });
        const reference = new MemorySession();
        for (const a of actions) {
          const both = async (fn: (s: TabulaAgentsSession | MemorySession) => Promise<unknown>) => {
            const settle = (p: Promise<unknown>) => p.then((value) => ({ ok: true, value }), () => ({ ok: false, value: null }));
            const [x, y] = [await settle(fn(ours)), await settle(fn(reference))];
            expect(x, JSON.stringify(a)).toEqual(y);
          };
          if (a.kind === 'add') await both((s) => s.addItems(a.texts.map(item)));
          else if (a.kind === 'pop') await both((s) => s.popItem());
          else if (a.kind === 'clear') await both((s) => s.clearSession());
          else if (a.kind === 'get') await both((s) => s.getItems(a.limit));
          else if (a.kind === 'append') await both((s) => s.applyHistoryTransaction({ operationId: `op${a.op}`, transaction: append(a.texts.map(item)) }));
          else {
            const current = await reference.getItems();
            const expectedSuffix = current.slice(current.length - Math.min(a.suffix, current.length));
            if (a.tweak) expectedSuffix.unshift(user('z'));
            await both((s) =>
              s.applyHistoryTransaction({ operationId: `op${a.op}`, transaction: { type: 'replace_suffix', expectedSuffix, replacement: a.texts.map(item) } }),
            );
          }
          expect(await chatOf(ours), JSON.stringify(a)).toEqual(toChatMessages(await reference.getItems()));
        }
        expect(await ours.getItems()).toEqual(await reference.getItems());
      }),
      fcParams(40),
    );
    await tabula.close();
  }, 120_000);
});
