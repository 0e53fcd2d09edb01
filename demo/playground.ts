/**
 * The first demo: the pure core at work in a page. A main context is
 * seeded with a short conversation; the controls fork it, let the fork
 * diverge, slice the main transcript and show the structural diff.
 */
import { PrefixContext, WorkingContext, lastTurns, messageText, type Message } from '../src/index.js';

function element<T extends HTMLElement>(testId: string): T {
  const found = document.querySelector<T>(`[data-testid="${testId}"]`);
  if (!found) throw new Error(`demo page is missing [data-testid="${testId}"]`);
  return found;
}

const main = new WorkingContext({
  prefix: new PrefixContext({ systemPrompt: 'You are a travel planner. Answer briefly.' }),
  messages: [
    { role: 'user', content: 'Plan three days in Lisbon.' },
    { role: 'assistant', content: 'Day 1 Alfama, day 2 Belém, day 3 Sintra.' },
    { role: 'user', content: 'Swap Sintra for Cascais.' },
    { role: 'assistant', content: 'Done: day 3 is Cascais.' },
  ],
  scratchpad: { city: 'Lisbon', days: 3 },
  limit: 8000,
});
let fork: WorkingContext | null = null;
let forkReplies = 0;

function renderMessages(list: HTMLOListElement, messages: readonly Message[]): void {
  list.replaceChildren(
    ...messages.map((message) => {
      const item = document.createElement('li');
      const role = document.createElement('span');
      role.className = 'role';
      role.textContent = message.role;
      item.append(role, messageText(message) || '(tool call)');
      return item;
    }),
  );
}

async function render(): Promise<void> {
  renderMessages(element('main-messages'), main.messages);
  element('main-meta').textContent = `${main.messages.length} messages · ~${await main.tokens()} tokens (estimate) · scratchpad ${JSON.stringify(main.scratchpad())}`;

  const turns = Math.max(0, Number(element<HTMLInputElement>('turns').value) || 0);
  renderMessages(element('slice-messages'), main.slice(lastTurns(turns)).messages);

  element<HTMLButtonElement>('fork-reply').disabled = fork === null;
  element<HTMLButtonElement>('merge').disabled = fork === null;
  if (fork) {
    renderMessages(element('fork-messages'), fork.messages);
    element('fork-meta').textContent = `${fork.messages.length} messages · scratchpad ${JSON.stringify(fork.scratchpad())}`;
    const diff = fork.diff(main);
    element('diff').textContent = JSON.stringify(
      {
        messagesAdded: diff.messagesAdded.map(messageText),
        messagesRemoved: diff.messagesRemoved.map(messageText),
        scratchpadChanges: diff.scratchpadChanges,
        prefixChanged: diff.prefixChanged,
      },
      null,
      2,
    );
  }
}

function rerender(): void {
  render().catch((error: unknown) => {
    element('diff').textContent = `Error: ${error instanceof Error ? error.message : String(error)}`;
  });
}

element<HTMLFormElement>('append-main').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = event.currentTarget as HTMLFormElement;
  const input = form.elements.namedItem('text') as HTMLInputElement;
  main.append({ role: 'user', content: input.value });
  input.value = '';
  rerender();
});

element('fork').addEventListener('click', () => {
  fork = main.fork();
  forkReplies = 0;
  rerender();
});

element('fork-reply').addEventListener('click', () => {
  if (!fork) return;
  forkReplies += 1;
  fork.append({ role: 'assistant', content: `Alternative plan #${forkReplies}: add a day trip to Óbidos.` });
  fork.set('days', 3 + forkReplies);
  rerender();
});

element('merge').addEventListener('click', () => {
  if (!fork) return;
  main.merge(fork, { mode: 'union' });
  rerender();
});

element('turns').addEventListener('input', rerender);

rerender();
