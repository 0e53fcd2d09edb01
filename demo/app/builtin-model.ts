/**
 * Chrome's built-in model (the Prompt API, `LanguageModel`), when the
 * browser has it: the conversation goes in as initial prompts, the reply
 * streams from `promptStreaming`, and the signal aborts it. No tools: the
 * Prompt API's tool use is not settled across Chrome versions.
 */
import type { Message } from '../../src/index.js';
import type { ChatModel, ModelEvent, ModelRequest } from './model.js';

interface PromptMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

interface LanguageModelSession {
  promptStreaming(input: string, options?: { signal?: AbortSignal }): ReadableStream<string>;
  readonly inputQuota?: number;
  destroy(): void;
}

interface LanguageModelApi {
  availability(options?: LanguageOptions): Promise<'unavailable' | 'downloadable' | 'downloading' | 'available'>;
  create(options: LanguageOptions & { initialPrompts?: PromptMessage[]; signal?: AbortSignal }): Promise<LanguageModelSession>;
}

interface LanguageOptions {
  expectedInputs?: { type: 'text'; languages: string[] }[];
  expectedOutputs?: { type: 'text'; languages: string[] }[];
}

const DEFAULT_CONTEXT = 4096;
// Chrome asks for the languages up front (and warns without them).
const ENGLISH: LanguageOptions = { expectedInputs: [{ type: 'text', languages: ['en'] }], expectedOutputs: [{ type: 'text', languages: ['en'] }] };

/** Whether this browser has the Prompt API at all (asking whether the model is ready is left to the settings). */
export function hasBuiltinModel(): boolean {
  return api() !== null;
}

function api(): LanguageModelApi | null {
  const candidate = (globalThis as { LanguageModel?: LanguageModelApi }).LanguageModel;
  return candidate && typeof candidate.create === 'function' ? candidate : null;
}

/** Whether this browser offers the built-in model, in words for the settings. */
export async function builtinAvailability(): Promise<{ available: boolean; note: string }> {
  const model = api();
  if (!model) return { available: false, note: '(not in this browser)' };
  const state = await model.availability(ENGLISH).catch(() => 'unavailable' as const);
  if (state === 'unavailable') return { available: false, note: '(unavailable on this device)' };
  return { available: true, note: state === 'available' ? '' : '(downloads on first use)' };
}

function asText(message: Message): string {
  if (typeof message.content === 'string') return message.content;
  return (message.content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/** A chat model over `LanguageModel`. */
export function builtinModel(): ChatModel {
  async function* reply({ messages, continueFrom, signal }: ModelRequest): AsyncGenerator<ModelEvent> {
    const model = api();
    if (!model) throw new Error("This browser has no built-in model; pick another in Model settings.");
    const prompts: PromptMessage[] = messages
      .filter((message) => message.role !== 'tool' && asText(message) !== '')
      .map((message) => ({ role: message.role === 'tool' ? 'user' : message.role, content: asText(message) }));
    const last = prompts.pop();
    const input = continueFrom === undefined ? (last?.content ?? '') : 'Continue your last answer exactly where it stopped.';
    if (continueFrom !== undefined && last) prompts.push(last, { role: 'assistant', content: continueFrom });
    const session = await model.create({ ...ENGLISH, initialPrompts: prompts, signal });
    try {
      const reader = session.promptStreaming(input, { signal }).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        yield { type: 'text', text: value };
      }
    } finally {
      session.destroy();
    }
  }
  return { name: 'chrome-built-in', contextTokens: DEFAULT_CONTEXT, reply };
}
