/**
 * Chat messages in the OpenAI chat wire format, and their validation.
 *
 * Messages are stored and passed around deep-frozen: a message that was
 * validated once cannot change afterwards, so contexts, snapshots and forks
 * can share the same objects without copying. This module does not know
 * about order keys or storage status; the store adds those.
 */
import * as z from 'zod/mini';
import { TabulaError, describeIssues } from './errors.js';
import { deepFreeze } from './json.js';
import { safeParse } from './validation.js';

/** Who speaks a message. */
export type Role = 'system' | 'user' | 'assistant' | 'tool';

/** A function call the assistant asks for; `arguments` is a JSON string, as on the wire. */
export interface ToolCall {
  /** The call's id, non-empty; the `tool` message that answers it names it in `tool_call_id`. */
  id: string;
  /** Always `'function'`, the only kind of call the chat format has. */
  type: 'function';
  /** The function to call (a non-empty name) and its arguments as a JSON string, unparsed. */
  function: { name: string; arguments: string };
}

/** One part of a multi-part message. */
export type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

/** A chat message in the OpenAI wire format. */
export interface Message {
  /** Who speaks it. */
  role: Role;
  /** Text, or parts of text and images; null only on an assistant message that makes tool calls. */
  content: string | ContentPart[] | null;
  /** Author tag; the `tagged(name)` scope selects on it. */
  name?: string;
  /** On an assistant message: the calls it asks for (no other role makes calls). */
  tool_calls?: ToolCall[];
  /** On a `tool` message: the id of the call it answers. */
  tool_call_id?: string;
}

const ToolCallSchema = z.strictObject({
  id: z.string().check(z.minLength(1, 'a tool call needs a non-empty id')),
  type: z.literal('function'),
  function: z.strictObject({
    name: z.string().check(z.minLength(1, 'a tool call needs a function name')),
    arguments: z.string(),
  }),
});

const ContentPartSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text'), text: z.string() }),
  z.strictObject({ type: z.literal('image_url'), image_url: z.strictObject({ url: z.string().check(z.minLength(1)) }) }),
]);

/**
 * The zod schema of a {@link Message}. Unknown fields are refused rather
 * than silently dropped, so nothing a caller stored disappears. Besides the
 * field types it checks the rules the chat API itself enforces: a `tool`
 * message names the call it answers, only an assistant makes tool calls, and
 * `content` may be null only on an assistant message that makes tool calls.
 */
export const MessageSchema: z.ZodMiniType<Message> = z
  .strictObject({
    role: z.enum(['system', 'user', 'assistant', 'tool']),
    content: z.union([z.string(), z.array(ContentPartSchema), z.null()]),
    name: z.optional(z.string().check(z.minLength(1, 'name, when present, must not be empty'))),
    tool_calls: z.optional(z.array(ToolCallSchema)),
    tool_call_id: z.optional(z.string().check(z.minLength(1))),
  })
  .check(
    z.superRefine((message, ctx) => {
      if (message.role === 'tool' && message.tool_call_id === undefined) {
        ctx.addIssue({ code: 'custom', path: ['tool_call_id'], message: 'a tool message must name the call it answers' });
      }
      if (message.role !== 'tool' && message.tool_call_id !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['tool_call_id'], message: 'only a tool message answers a call' });
      }
      if (message.tool_calls !== undefined && message.role !== 'assistant') {
        ctx.addIssue({ code: 'custom', path: ['tool_calls'], message: 'only an assistant message makes tool calls' });
      }
      if (message.content === null && !(message.role === 'assistant' && message.tool_calls?.length)) {
        ctx.addIssue({
          code: 'custom',
          path: ['content'],
          message: 'content may be null only on an assistant message with tool_calls; use "" for an empty message',
        });
      }
    }),
  );

const STORAGE_FIELDS = ['id', 'order', 'status', 'createdAt'] as const;

/**
 * A message as the store returns it (a StoredMessage: the message plus
 * `id`, `order`, `status` and `createdAt`) is accepted wherever a message
 * is: those four fields are the store's bookkeeping, not part of the chat
 * message, so they are dropped and the store assigns fresh ones on append.
 * Only all four together are dropped; a stray `id` alone is still refused
 * as an unknown field.
 */
function withoutStorageFields(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const record = value as Record<string, unknown>;
  const isStored =
    typeof record.id === 'string' &&
    typeof record.order === 'string' &&
    typeof record.createdAt === 'number' &&
    (record.status === 'complete' || record.status === 'streaming' || record.status === 'interrupted');
  if (!isStored) return value;
  const copy: Record<string, unknown> = { ...record };
  for (const field of STORAGE_FIELDS) delete copy[field];
  return copy;
}

/**
 * Validates `value` as a message and returns a deep-frozen copy of it.
 * A StoredMessage is accepted; its storage fields are dropped (see
 * `withoutStorageFields`).
 * Throws `schema/invalid` naming `where` (e.g. `messages[3]`) and each bad
 * field; `issues` holds zod's issues untouched.
 */
export function parseMessage(value: unknown, where = 'message'): Message {
  const result = safeParse(MessageSchema, withoutStorageFields(value));
  if (!result.success) {
    const issues = result.error.issues;
    throw new TabulaError(
      'schema/invalid',
      `${where} is not a valid chat message: ${describeIssues(issues)}.`,
      { issues },
    );
  }
  return deepFreeze(result.data);
}

/** Validates and freezes each message; `where` names the list in errors. */
export function parseMessages(values: Iterable<unknown>, where = 'messages'): Message[] {
  const out: Message[] = [];
  let index = 0;
  for (const value of values) out.push(parseMessage(value, `${where}[${index++}]`));
  return out;
}

/** The text a person would read: string content, or the text parts joined. */
export function messageText(message: Message): string {
  if (typeof message.content === 'string') return message.content;
  if (message.content === null) return '';
  return message.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
}
