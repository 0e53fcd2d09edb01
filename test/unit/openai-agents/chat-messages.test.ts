/** toChatMessages: the chat view of an agent history, for token counts and contexts. */
import type { AgentInputItem } from '@openai/agents-core';
import { describe, expect, it } from 'vitest';
import { ApproxTokenCounter, WorkingContext } from '../../../src/index.js';
import { toChatMessages } from '../../../src/openai-agents/index.js';

const history: AgentInputItem[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Weather in Lisbon and Porto?' },
  { type: 'reasoning', id: 'rs_1', content: [{ type: 'input_text', text: 'two calls' }] },
  { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Checking.' }] },
  { type: 'function_call', callId: 'c1', name: 'weather', arguments: '{"city":"Lisbon"}', status: 'completed' },
  { type: 'function_call', callId: 'c2', name: 'weather', arguments: '{"city":"Porto"}', status: 'completed' },
  { type: 'function_call_result', callId: 'c1', name: 'weather', status: 'completed', output: { type: 'text', text: 'sunny' } },
  { type: 'function_call_result', callId: 'c2', name: 'weather', status: 'completed', output: 'rain' },
  { type: 'function_call', callId: 'c3', name: 'weather', arguments: '{}', status: 'completed' },
  {
    role: 'user',
    content: [
      { type: 'input_text', text: 'And this?' },
      { type: 'input_image', image: 'https://example.com/a.png' },
      { type: 'input_file', file: { id: 'file_1' } },
    ],
  },
];

describe('toChatMessages', () => {
  it('maps every item with a chat equivalent, grouping calls onto their assistant message', () => {
    expect(toChatMessages(history)).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Lisbon and Porto?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Lisbon"}' } },
          { id: 'c2', type: 'function', function: { name: 'weather', arguments: '{"city":"Porto"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'c2', content: 'rain' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c3', type: 'function', function: { name: 'weather', arguments: '{}' } }] },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'And this?' },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
        ],
      },
    ]);
  });

  it('feeds Tabula contexts and token counters', async () => {
    const context = new WorkingContext({ messages: toChatMessages(history) });
    expect(context.messages).toHaveLength(7);
    expect(await new ApproxTokenCounter().count(context.messages)).toBeGreaterThan(0);
  });
});
