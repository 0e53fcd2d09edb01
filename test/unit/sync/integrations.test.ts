/**
 * The integrations through sync: an OpenAI Agents SDK session and a
 * LangGraph thread started on one device continue on another (issue 13's
 * "on another device through sync"). Items come back deep-equal, the chat
 * view follows, and the graph resumes from the checkpoint the first device
 * wrote.
 */
import type { AgentInputItem } from '@openai/agents-core';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { describe, expect, it } from 'vitest';
import { TabulaCheckpointSaver } from '../../../src/langgraph/index.js';
import { TabulaAgentsSession } from '../../../src/openai-agents/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { device, startServer } from './helpers.js';

describe('integrations across devices through sync', () => {
  it('an agents session continues on another device with every item deep-equal, and its chat view', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const laptop = await device(server, alice);
    const phone = await device(server, alice);
    const items: AgentInputItem[] = [
      { role: 'user', content: 'Weather in Lisbon?' },
      { type: 'function_call', callId: 'c1', name: 'weather', arguments: '{"city":"Lisbon"}', status: 'completed' },
      { type: 'function_call_result', callId: 'c1', name: 'weather', status: 'completed', output: { type: 'text', text: 'sunny' } },
      { type: 'reasoning', content: [{ type: 'input_text', text: 'The tool said sunny.' }], providerData: { effort: 'low' } },
      { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Sunny in Lisbon.' }] },
    ];
    const onLaptop = new TabulaAgentsSession({ tabula: laptop, sessionId: 'trip' });
    await onLaptop.addItems(items);
    await onLaptop.popItem();
    await onLaptop.addItems([{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'It is sunny.' }] }]);
    await laptop.sync?.flush();
    await phone.sync?.flush();

    const onPhone = new TabulaAgentsSession({ tabula: phone, sessionId: 'trip' });
    expect(await onPhone.getItems()).toEqual(await onLaptop.getItems());
    expect((await onPhone.getItems()).at(-1)).toMatchObject({ content: [{ text: 'It is sunny.' }] });
    const chat = async (agents: TabulaAgentsSession) => (await (await agents.session()).messages()).map(({ role, content }) => ({ role, content }));
    expect(await chat(onPhone)).toEqual(await chat(onLaptop));
    // And back: the phone's turn reaches the laptop.
    await onPhone.addItems([{ role: 'user', content: 'And tomorrow?' }]);
    await phone.sync?.flush();
    await laptop.sync?.flush();
    expect((await onLaptop.getItems()).at(-1)).toEqual({ role: 'user', content: 'And tomorrow?' });
    await laptop.close();
    await phone.close();
  });

  it('a LangGraph thread resumes on another device from the checkpoint the first one wrote', { timeout: 60_000 }, async () => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const laptop = await device(server, alice);
    const phone = await device(server, alice);
    const Log = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }) });
    const graph = (saver: TabulaCheckpointSaver) =>
      new StateGraph(Log)
        .addNode('step', (state) => ({ log: [`step ${state.log.length + 1}`] }))
        .addEdge(START, 'step')
        .addEdge('step', END)
        .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'plan' } };
    await graph(new TabulaCheckpointSaver({ tabula: laptop })).invoke({ log: ['hello'] }, config);
    await laptop.sync?.flush();
    await phone.sync?.flush();

    const onPhone = graph(new TabulaCheckpointSaver({ tabula: phone }));
    expect((await onPhone.getState(config)).values).toEqual({ log: ['hello', 'step 2'] });
    expect((await onPhone.invoke({ log: ['again'] }, config)).log).toEqual(['hello', 'step 2', 'again', 'step 4']);
    await phone.sync?.flush();
    await laptop.sync?.flush();
    expect((await graph(new TabulaCheckpointSaver({ tabula: laptop })).getState(config)).values).toEqual({ log: ['hello', 'step 2', 'again', 'step 4'] });
    await laptop.close();
    await phone.close();
  });
});
