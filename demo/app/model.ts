/**
 * What the chat needs from a model, whichever it is (the scripted offline
 * agent, an OpenAI-compatible endpoint, Chrome's built-in model): given the
 * conversation and the blackboard, stream text and tool calls, and stop
 * when the signal aborts. Tools are the demo's blackboard tools, run by the
 * chat between model rounds.
 */
import type { Blackboard, JsonValue, Message, ToolCall } from '../../src/index.js';

/** One piece of a model's answer. */
export type ModelEvent = { readonly type: 'text'; readonly text: string } | { readonly type: 'tool-calls'; readonly calls: readonly ToolCall[] };

/** What a model is asked with. */
export interface ModelRequest {
  /** Prefix and messages, oldest first, as the model should see them. */
  readonly messages: readonly Message[];
  readonly board: Blackboard;
  /** Set when the last assistant message was interrupted and should be continued, not restarted. */
  readonly continueFrom?: string;
  /** Aborted by Stop (in any tab) and by page unload. */
  readonly signal: AbortSignal;
}

/** A model the chat can talk to. */
export interface ChatModel {
  /** The author tag of its messages, e.g. 'scripted' or 'gpt-4o-mini'. */
  readonly name: string;
  /** Its context window, in tokens, for the meter. */
  readonly contextTokens: number;
  reply(request: ModelRequest): AsyncIterable<ModelEvent>;
}

/** The blackboard tools every model may call, in OpenAI's tool format. */
export const BOARD_TOOLS = [
  {
    type: 'function',
    function: {
      name: 'blackboard_set',
      description: "Writes a JSON value under a key of this chat's shared blackboard (every tab and device sees it).",
      parameters: {
        type: 'object',
        properties: { key: { type: 'string' }, value: { description: 'Any JSON value.' } },
        required: ['key', 'value'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'blackboard_get',
      description: "Reads the whole blackboard of this chat as a JSON object.",
      parameters: { type: 'object', properties: {} },
    },
  },
] as const;

/** Runs one tool call against the board and returns the tool message's content. */
export function runBoardTool(call: ToolCall, board: Blackboard, set: (key: string, value: JsonValue) => void): string {
  try {
    if (call.function.name === 'blackboard_get') return JSON.stringify(board.toJSON());
    if (call.function.name === 'blackboard_set') {
      const args = JSON.parse(call.function.arguments || '{}') as { key?: unknown; value?: JsonValue };
      if (typeof args.key !== 'string' || args.key === '' || args.value === undefined) return 'Error: blackboard_set needs {"key": string, "value": JSON}.';
      set(args.key, args.value);
      return `ok: ${args.key} = ${JSON.stringify(args.value)}`;
    }
    return `Error: there is no tool named ${call.function.name}.`;
  } catch (error) {
    return `Error: ${error instanceof Error ? error.message : String(error)}`;
  }
}
