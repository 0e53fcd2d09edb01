/**
 * A model behind an OpenAI-compatible `/chat/completions` endpoint (OpenAI,
 * a local llama.cpp or Ollama server, a proxy): streamed with SSE, tool
 * calls assembled from their deltas, the request aborted by the signal
 * (Stop). HTTP failures become errors whose message says what to do; the
 * chat shows them inline and keeps the conversation.
 */
import type { Message, ToolCall } from '../../src/index.js';
import { BOARD_TOOLS, type ChatModel, type ModelEvent, type ModelRequest } from './model.js';

/** Where and what to ask. */
export interface OpenAiSettings {
  /** e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  readonly baseUrl: string;
  /** Sent as a bearer token; kept in this browser's localStorage only. */
  readonly apiKey: string;
  readonly model: string;
  readonly contextTokens: number;
}

interface ChunkDelta {
  content?: string | null;
  tool_calls?: { index: number; id?: string; function?: { name?: string; arguments?: string } }[];
}

/** Why a request failed, in words for the chat. */
async function describeFailure(response: Response): Promise<string> {
  let detail = '';
  try {
    const body = (await response.json()) as { error?: { message?: string } };
    detail = body.error?.message ? ` (${body.error.message})` : '';
  } catch {
    // Not JSON: the status says enough.
  }
  switch (response.status) {
    case 401:
    case 403:
      return `The endpoint refused the API key (HTTP ${response.status})${detail}. Check the key in Model settings.`;
    case 429:
      return `The endpoint is rate limiting or out of quota (HTTP 429)${detail}. Wait a moment, then Retry.`;
    case 404:
      return `The endpoint has no such model or path (HTTP 404)${detail}. Check the base URL and model in Model settings.`;
    default:
      return `The endpoint failed with HTTP ${response.status}${detail}. Retry, or check Model settings.`;
  }
}

/** Splits an SSE byte stream into the `data:` payloads of its events. */
async function* sseData(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const onAbort = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener('abort', onAbort, { once: true });
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      signal.throwIfAborted();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        const data = event
          .split(/\r?\n/)
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).replace(/^ /, ''))
          .join('\n');
        if (data !== '') yield data;
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    reader.releaseLock();
  }
}

function forEndpoint(message: Message): Message {
  // `name` must match ^[a-zA-Z0-9_-]+$ on OpenAI; the demo's author tags need not.
  const { name: _name, ...rest } = message;
  return rest;
}

/** A chat model over an OpenAI-compatible endpoint; `fetchImpl` is for tests. */
export function openAiModel(settings: OpenAiSettings, fetchImpl: typeof fetch = (input, init) => fetch(input, init)): ChatModel {
  async function* reply({ messages, continueFrom, signal }: ModelRequest): AsyncGenerator<ModelEvent> {
    const wire = messages.map(forEndpoint);
    if (continueFrom !== undefined) {
      wire.push({ role: 'assistant', content: continueFrom }, { role: 'user', content: 'Continue your last answer exactly where it stopped, without repeating it.' });
    }
    let response: Response;
    try {
      response = await fetchImpl(`${settings.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {}) },
        body: JSON.stringify({ model: settings.model, messages: wire, tools: BOARD_TOOLS, stream: true }),
        signal,
      });
    } catch (error) {
      signal.throwIfAborted();
      throw new Error(`The endpoint is unreachable (${error instanceof Error ? error.message : String(error)}). Check your network and the base URL, then Retry.`, { cause: error });
    }
    if (!response.ok || !response.body) throw new Error(await describeFailure(response));
    const calls: { id: string; name: string; arguments: string }[] = [];
    for await (const data of sseData(response.body, signal)) {
      if (data === '[DONE]') break;
      let chunk: { choices?: { delta?: ChunkDelta }[] };
      try {
        chunk = JSON.parse(data) as typeof chunk;
      } catch (error) {
        throw new Error('The endpoint sent a stream event that is not JSON; is the base URL an OpenAI-compatible API?', { cause: error });
      }
      const delta = chunk.choices?.[0]?.delta;
      if (!delta) continue;
      if (delta.content) yield { type: 'text', text: delta.content };
      for (const part of delta.tool_calls ?? []) {
        const call = (calls[part.index] ??= { id: '', name: '', arguments: '' });
        if (part.id) call.id = part.id;
        if (part.function?.name) call.name += part.function.name;
        if (part.function?.arguments) call.arguments += part.function.arguments;
      }
    }
    const complete = calls.filter((call) => call.name !== '');
    if (complete.length > 0) {
      const toolCalls: ToolCall[] = complete.map((call, index) => ({ id: call.id || `call_${index}`, type: 'function', function: { name: call.name, arguments: call.arguments } }));
      yield { type: 'tool-calls', calls: toolCalls };
    }
  }
  return { name: settings.model || 'openai', contextTokens: settings.contextTokens, reply };
}
