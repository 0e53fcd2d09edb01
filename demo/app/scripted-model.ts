/**
 * The demo's offline "model": a deterministic agent that needs no network.
 * It calls the blackboard tools for `todo:`, `goal:` and `done`, answers
 * everything else from what the blackboard holds, streams word by word and
 * stops as soon as the signal aborts. Asked to continue an interrupted
 * reply, it streams the rest of the same answer.
 */
import type { Blackboard, Message, ToolCall } from '../../src/index.js';
import type { ChatModel, ModelEvent, ModelRequest } from './model.js';

const WORD_DELAY_MS = 30;
/** The context window the meter measures the scripted agent against. */
const CONTEXT_TOKENS = 8192;

function textOf(message: Message | undefined): string {
  if (!message) return '';
  if (typeof message.content === 'string') return message.content;
  return (message.content ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

function todos(board: Blackboard): string[] {
  const value = board.get('todos');
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function call(key: string, value: unknown): ToolCall {
  return { id: `call_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`, type: 'function', function: { name: 'blackboard_set', arguments: JSON.stringify({ key, value }) } };
}

/** The tool call a user message asks for, if any. */
function plan(input: string, board: Blackboard): ToolCall | null {
  const lower = input.toLowerCase();
  if (lower.startsWith('todo:')) return call('todos', [...todos(board), input.slice(5).trim()]);
  if (lower.startsWith('goal:')) return call('goal', input.slice(5).trim());
  if (lower === 'done' || lower.startsWith('done:')) return call('todos', todos(board).slice(1));
  return null;
}

function answer(input: string, board: Blackboard, turns: number): string {
  const lower = input.toLowerCase();
  const list = todos(board);
  if (lower.startsWith('todo:')) return `Added **“${input.slice(5).trim()}”** to the todo list on the blackboard. It now has ${list.length} item${list.length === 1 ? '' : 's'}.`;
  if (lower.startsWith('goal:')) return `Goal set: “${input.slice(5).trim()}”. Every tab and device sees it on the blackboard now.`;
  if (lower === 'done' || lower.startsWith('done:')) return `Checked off the first todo. ${list.length} left.`;
  const goal = board.get('goal');
  return [
    `You said: “${input}”.`,
    '',
    typeof goal === 'string' ? `Keeping our goal in mind (**${goal}**):` : 'No goal yet (try `goal: plan a trip`). Meanwhile:',
    '',
    list.length > 0 ? list.map((item) => `- ${item}`).join('\n') : '- the todo list is empty (try `todo: book flights`)',
    '',
    `This is turn ${turns} of this chat. Everything you see is stored in this browser, and this reply is written to IndexedDB as it streams, so a reload or a crash keeps it. Press Esc to stop me.`,
  ].join('\n');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A seam for the end-to-end tests: while `globalThis.demoHoldReplies` is true, a reply waits after its
 * first word until a `demo-release` event on globalThis or its stop, so a test can act while a reply
 * streams however slow the machine is (a reply of 2 s may end before a loaded test runner looks).
 */
function held(signal: AbortSignal): Promise<void> {
  if ((globalThis as { demoHoldReplies?: boolean }).demoHoldReplies !== true) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const release = () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    };
    const onAbort = () => {
      globalThis.removeEventListener('demo-release', release);
      reject(signal.reason as Error);
    };
    globalThis.addEventListener('demo-release', release, { once: true });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

async function* reply({ messages, board, continueFrom, signal }: ModelRequest): AsyncGenerator<ModelEvent> {
  signal.throwIfAborted();
  const userMessages = messages.filter((message) => message.role === 'user');
  const input = textOf(userMessages.at(-1)).trim();
  if (messages.at(-1)?.role === 'user') {
    const toolCall = plan(input, board);
    if (toolCall) {
      yield { type: 'tool-calls', calls: [toolCall] };
      return;
    }
  }
  const full = answer(input, board, userMessages.length);
  const rest = continueFrom !== undefined && full.startsWith(continueFrom) ? full.slice(continueFrom.length) : full;
  let first = true;
  for (const word of rest.split(/(?<=[ \n])/)) {
    await sleep(WORD_DELAY_MS, signal);
    yield { type: 'text', text: word };
    if (first) await held(signal);
    first = false;
  }
}

/** The scripted offline agent. */
export function scriptedModel(): ChatModel {
  return { name: 'scripted', contextTokens: CONTEXT_TOKENS, reply };
}
