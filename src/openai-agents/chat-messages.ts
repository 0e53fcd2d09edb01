/**
 * The chat view of an Agents SDK history: the items that have an OpenAI
 * chat equivalent, as Tabula `Message`s (user/assistant/system text, a
 * function call as an assistant `tool_calls` entry, its result as a `tool`
 * message). Reasoning, hosted-tool and other items have none and are left
 * out. Pure. `TabulaAgentsSession` keeps this view in `session.messages()`.
 */
import type { AgentInputItem } from '@openai/agents-core';
import { isTabulaError, parseMessage, type ContentPart, type Message } from '../index.js';

type Loose = Record<string, unknown>;

const str = (value: unknown): string => (typeof value === 'string' ? value : '');

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part: Loose) => (typeof part.text === 'string' ? part.text : typeof part.refusal === 'string' ? part.refusal : ''))
    .join('');
}

function userContent(content: unknown): string | ContentPart[] {
  if (!Array.isArray(content)) return typeof content === 'string' ? content : '';
  const parts: ContentPart[] = [];
  for (const part of content as Loose[]) {
    if (part.type === 'input_text' && typeof part.text === 'string') parts.push({ type: 'text', text: part.text });
    else if (part.type === 'input_image' && typeof part.image === 'string') parts.push({ type: 'image_url', image_url: { url: part.image } });
  }
  return parts.every((part) => part.type === 'text') ? parts.map((part) => (part as { text: string }).text).join('') : parts;
}

function resultText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (output && typeof output === 'object' && !Array.isArray(output) && (output as Loose).type === 'text') return str((output as Loose).text);
  return JSON.stringify(output) ?? '';
}

/** A chat message of an agent history and the index of the first item it comes from. */
export interface ChatGroup {
  /** Index in the items of the item that starts this message (a function call joins the message before it). */
  start: number;
  message: Message;
}

/**
 * Maps agent items to chat messages, in order, each with the index of the
 * item it starts at. Consecutive function calls join the assistant message
 * before them, as the chat format groups them.
 */
export function toChatGroups(items: readonly AgentInputItem[]): ChatGroup[] {
  const out: ChatGroup[] = [];
  (items as readonly Loose[]).forEach((raw, index) => {
    const previous = out.at(-1)?.message;
    if (raw.type === 'function_call') {
      const call = { id: str(raw.callId), type: 'function' as const, function: { name: str(raw.name), arguments: str(raw.arguments) } };
      if (previous?.role === 'assistant') out[out.length - 1]!.message = { ...previous, tool_calls: [...(previous.tool_calls ?? []), call] };
      else out.push({ start: index, message: { role: 'assistant', content: null, tool_calls: [call] } });
    } else if (raw.type === 'function_call_result') {
      out.push({ start: index, message: { role: 'tool', tool_call_id: str(raw.callId), content: resultText(raw.output) } });
    } else if (raw.type === undefined || raw.type === 'message') {
      if (raw.role === 'user') out.push({ start: index, message: { role: 'user', content: userContent(raw.content) } });
      else if (raw.role === 'system') out.push({ start: index, message: { role: 'system', content: textOf(raw.content) } });
      else if (raw.role === 'assistant') out.push({ start: index, message: { role: 'assistant', content: textOf(raw.content) } });
    }
  });
  // An item too malformed for a chat message (a call without a callId or name) has no chat equivalent.
  return out.flatMap((group) => {
    try {
      return [{ start: group.start, message: parseMessage(group.message) }];
    } catch (error) {
      if (isTabulaError(error, 'schema/invalid')) return [];
      throw error;
    }
  });
}

/**
 * Maps agent items to chat messages, in order. Consecutive function calls
 * join the assistant message before them, as the chat format groups them.
 */
export function toChatMessages(items: readonly AgentInputItem[]): Message[] {
  return toChatGroups(items).map((group) => group.message);
}
