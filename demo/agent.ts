/**
 * The demo's offline "model": a deterministic responder that streams its
 * reply word by word, honours the abort signal, and uses the blackboard as
 * shared memory. It stands in for a real model API so the demo works with
 * no network at all.
 */
import type { Blackboard } from '../src/index.js';

const WORD_DELAY_MS = 35;

/** What the agent decided to say and what it wrote to the blackboard. */
export interface AgentTurn {
  /** The reply, streamed word by word. */
  words: AsyncGenerator<string>;
  /** One line for the agent's notes. */
  note: string;
}

function todos(board: Blackboard): string[] {
  const value = board.get('todos');
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

async function* stream(text: string, signal: AbortSignal): AsyncGenerator<string> {
  for (const word of text.split(/(?<= )/)) {
    signal.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, WORD_DELAY_MS));
    signal.throwIfAborted();
    yield word;
  }
}

/** Plans a reply to `input` and applies its blackboard changes. */
export function respond(input: string, board: Blackboard, context: { messages: number; tokens: number }, signal: AbortSignal): AgentTurn {
  const text = input.trim();
  const lower = text.toLowerCase();
  if (lower.startsWith('todo:')) {
    const item = text.slice(5).trim();
    const list = [...todos(board), item];
    board.set('todos', list);
    return { note: `added a todo (${list.length} in all)`, words: stream(`Added “${item}” to the todo list on the blackboard. It now has ${list.length} item${list.length === 1 ? '' : 's'}.`, signal) };
  }
  if (lower.startsWith('goal:')) {
    const goal = text.slice(5).trim();
    board.set('goal', goal);
    return { note: 'set the goal', words: stream(`Goal set: “${goal}”. Every tab sees it on the blackboard now.`, signal) };
  }
  if (lower === 'done' || lower.startsWith('done:')) {
    const [first, ...rest] = todos(board);
    board.set('todos', rest);
    return { note: 'checked off a todo', words: stream(first ? `Checked off “${first}”. ${rest.length} left.` : 'There is nothing on the todo list.', signal) };
  }
  const goal = board.get('goal');
  const open = todos(board);
  const parts = [
    `You said: “${text}”.`,
    typeof goal === 'string' ? `Keeping our goal in mind (${goal}),` : 'No goal yet (try “goal: plan a trip”), so',
    open.length > 0 ? `the next todo is “${open[0]}”.` : 'the todo list is empty (try “todo: book flights”).',
    `This chat has ${context.messages} messages and about ${context.tokens} tokens so far.`,
    'Everything you see here is stored in this browser, and the long answer you are reading is being written to IndexedDB as it streams, so a reload keeps it.',
  ];
  return { note: 'answered', words: stream(parts.join(' '), signal) };
}
