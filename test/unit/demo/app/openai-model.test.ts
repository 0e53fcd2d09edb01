/**
 * The demo's OpenAI-compatible client, over a fake fetch: the SSE stream is
 * cut into chunks at random places (inside an event, a line break, a
 * multi-byte character), and the model must yield the same text and tool
 * calls however it is cut.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Blackboard, ToolCall } from '../../../../src/index.js';
import type { ModelEvent } from '../../../../demo/app/model.js';
import { openAiModel } from '../../../../demo/app/openai-model.js';
import { fcParams } from '../../seed.js';

const settings = { baseUrl: 'https://llm.test/v1/', apiKey: 'sk-test', model: 'fake', contextTokens: 8192 };
const board = {} as Blackboard;

function streamOf(bytes: Uint8Array, cuts: number[]): ReadableStream<Uint8Array> {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const point of [...points, bytes.length]) {
    if (point > from) chunks.push(bytes.slice(from, point));
    from = Math.max(from, point);
  }
  return new ReadableStream({
    pull(controller) {
      const next = chunks.shift();
      if (next) controller.enqueue(next);
      else controller.close();
    },
  });
}

async function run(body: ReadableStream<Uint8Array> | string, status = 200): Promise<{ text: string; calls: ToolCall[]; requests: RequestInit[] }> {
  const requests: RequestInit[] = [];
  const fakeFetch = (async (_url: RequestInfo | URL, init?: RequestInit) => {
    requests.push(init ?? {});
    return new Response(body, { status, headers: { 'content-type': status === 200 ? 'text/event-stream' : 'application/json' } });
  }) as typeof fetch;
  let text = '';
  const calls: ToolCall[] = [];
  const events: AsyncIterable<ModelEvent> = openAiModel(settings, fakeFetch).reply({ messages: [{ role: 'user', content: 'hi' }], board, signal: new AbortController().signal });
  for await (const event of events) {
    if (event.type === 'text') text += event.text;
    else calls.push(...event.calls);
  }
  return { text, calls, requests };
}

const delta = (value: object) => JSON.stringify({ choices: [{ index: 0, delta: value }] });

describe('openAiModel', () => {
  it('yields the same text and tool calls however the SSE stream is cut', async () => {
    const pieces = ['Olá ', 'wörld ', '🌍 ', 'line\nbreak', ''];
    const events = [
      ...pieces.map((content) => delta({ content })),
      delta({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'blackboard_set', arguments: '{"key":' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: '"k","value":"é"}' } }] }),
      delta({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'blackboard_get', arguments: '' } }] }),
    ];
    // CRLF and LF framings both appear in the wild.
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat(), { maxLength: 40 }), fc.boolean(), async (cuts, crlf) => {
        const newline = crlf ? '\r\n' : '\n';
        const sse = `: keep-alive${newline}${newline}${events.map((event) => `data: ${event}${newline}${newline}`).join('')}data: [DONE]${newline}${newline}`;
        const { text, calls } = await run(streamOf(new TextEncoder().encode(sse), cuts));
        expect(text).toBe(pieces.join(''));
        expect(calls).toEqual([
          { id: 'call_a', type: 'function', function: { name: 'blackboard_set', arguments: '{"key":"k","value":"é"}' } },
          { id: 'call_b', type: 'function', function: { name: 'blackboard_get', arguments: '' } },
        ]);
      }),
      fcParams(200),
    );
  });

  it('sends the key, the model, the tools and stream: true to <baseUrl>/chat/completions', async () => {
    const { requests } = await run(`data: ${delta({ content: 'ok' })}\n\ndata: [DONE]\n\n`);
    const init = requests[0] ?? {};
    expect(new Headers(init.headers).get('authorization')).toBe('Bearer sk-test');
    const body = JSON.parse(init.body as string) as { model: string; stream: boolean; tools: unknown[] };
    expect(body).toMatchObject({ model: 'fake', stream: true });
    expect(body.tools.length).toBe(2);
  });

  it.each([
    [401, 'refused the API key'],
    [429, 'rate limiting'],
    [404, 'no such model or path'],
    [500, 'failed with HTTP 500'],
  ])('turns HTTP %i into an error that says what to do', async (status, words) => {
    await expect(run(JSON.stringify({ error: { message: 'from the endpoint' } }), status)).rejects.toThrow(new RegExp(`${words}.*from the endpoint`));
  });
});
