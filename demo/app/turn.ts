/**
 * One agent turn as a `session.run`: append the user's message, ask the
 * model, stream its text durably (every tab sees it grow, a crash keeps
 * it), run the blackboard tools it calls and ask again, at most a few
 * rounds. Retry drops the unanswered tail after the last user message and
 * asks again; Continue asks for the rest of an interrupted reply.
 *
 * The reply message is created on the first piece of text, so a request
 * refused at once (401, 429, offline) leaves the conversation as it was.
 */
import type { Message, MessageStream, Session, StoredMessage, ToolCall } from '../../src/index.js';
import { setWithWriter } from './board-writers.js';
import { runBoardTool, type ChatModel } from './model.js';

const MAX_ROUNDS = 4;
const TITLE_LENGTH = 48;

/** What the user asked for. */
export type TurnKind = { readonly kind: 'send'; readonly text: string } | { readonly kind: 'retry' } | { readonly kind: 'continue' };

export interface TurnOptions {
  readonly session: Session;
  readonly model: ChatModel;
  /** Names the agent in the blackboard's "last written by" column. */
  readonly agentLabel: string;
}

/** The text of a message's content. */
export function textOf(message: Pick<Message, 'content'>): string {
  if (typeof message.content === 'string') return message.content;
  return (message.content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/** A chat title from its first message. */
export function titleFrom(text: string): string {
  const line = text.trim().replace(/\s+/g, ' ');
  return line.length > TITLE_LENGTH ? `${line.slice(0, TITLE_LENGTH - 1)}…` : line || 'New chat';
}

function toWire(message: StoredMessage): Message {
  const { role, content, name, tool_calls, tool_call_id } = message;
  return { role, content, ...(name ? { name } : {}), ...(tool_calls ? { tool_calls } : {}), ...(tool_call_id ? { tool_call_id } : {}) };
}

/** Messages after the last user message: what Retry replaces. */
export function unansweredTail(messages: readonly StoredMessage[]): StoredMessage[] {
  let lastUser = messages.length - 1;
  while (lastUser >= 0 && messages[lastUser]?.role !== 'user') lastUser--;
  return lastUser < 0 ? [] : messages.slice(lastUser + 1);
}

/** Runs one turn; rejects with `run/interrupted` on Stop, or with the model's error. */
export async function runTurn(turn: TurnKind, { session, model, agentLabel }: TurnOptions): Promise<void> {
  await session.run(
    async (ctx) => {
      const board = session.blackboard;
      await board.whenLoaded;
      if (turn.kind === 'send') {
        await ctx.append({ role: 'user', content: turn.text });
        if (typeof ctx.get('title') !== 'string') ctx.set('title', titleFrom(turn.text));
      } else if (turn.kind === 'retry') {
        const tail = unansweredTail(await session.messages());
        if (tail.length > 0) await session.memory().transact((tx) => tx.removeMessages(tail.map((message) => message.id)));
      }
      let continueFrom: string | undefined;
      for (let round = 0; round < MAX_ROUNDS; round++) {
        const stored = await session.messages();
        const last = stored.at(-1);
        let history = stored;
        if (round === 0 && turn.kind === 'continue' && last?.role === 'assistant' && last.status === 'interrupted') {
          continueFrom = textOf(last);
          history = stored.slice(0, -1);
        }
        const prefix = (await session.prefix()).asMessages();
        let reply: MessageStream | null = null;
        const calls: ToolCall[] = [];
        try {
          const events = model.reply({ messages: [...prefix, ...history.map(toWire)], board, signal: ctx.signal, ...(continueFrom === undefined ? {} : { continueFrom }) });
          for await (const event of events) {
            if (event.type === 'text') {
              reply ??= await session.stream({ role: 'assistant', name: model.name });
              reply.write(event.text);
            } else {
              calls.push(...event.calls);
            }
          }
        } catch (error) {
          // Keep what was streamed, marked interrupted: Continue picks it up.
          if (reply) await reply.abort(error instanceof Error ? error.message : String(error));
          throw error;
        }
        if (!reply && calls.length === 0) return;
        reply ??= await session.stream({ role: 'assistant', name: model.name });
        await reply.done(calls.length > 0 ? { tool_calls: calls } : undefined);
        if (calls.length === 0) {
          await ctx.note(`${model.name}: answered${turn.kind === 'send' ? '' : ` (${turn.kind})`}`);
          return;
        }
        for (const call of calls) {
          const result = runBoardTool(call, board, (key, value) => setWithWriter(board, key, value, agentLabel));
          await ctx.append({ role: 'tool', tool_call_id: call.id, content: result });
          await ctx.note(`${model.name}: ${call.function.name} → ${result.slice(0, 120)}`);
        }
        continueFrom = undefined;
      }
    },
    { scope: 'chat' },
  );
}
