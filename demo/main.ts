/**
 * The demo app: an offline chat agent on Tabula. Each chat is a session;
 * a turn is a `session.run` that streams the agent's reply durably and can
 * be stopped from any tab; the blackboard panel is the session's shared
 * scratchpad; the token count comes from the worker counter.
 */
import { createTokenCounter, isTabulaError, openTabula, type JsonValue, type Session } from '../src/index.js';
import { respond } from './agent.js';

function element<T extends HTMLElement>(testId: string): T {
  const found = document.querySelector<T>(`[data-testid="${testId}"]`);
  if (!found) throw new Error(`demo page is missing [data-testid="${testId}"]`);
  return found;
}

const counter = createTokenCounter({ encoding: 'o200k_base', worker: 'shared' });
const tabula = await openTabula({ name: 'tabula-demo', userId: 'demo-user', tokenCounter: counter });
let session: Session | null = null;
let detach: (() => void)[] = [];

const status = (text: string) => (element('status').textContent = text);

async function renderSessions(): Promise<void> {
  const list = await tabula.sessions();
  element('sessions').replaceChildren(
    ...list.map((info) => {
      const item = document.createElement('li');
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = `${info.sessionId} (${info.messageCount})`;
      button.setAttribute('aria-current', String(info.sessionId === session?.sessionId));
      button.addEventListener('click', () => void open(info.sessionId));
      item.append(button);
      return item;
    }),
  );
  const storage = await tabula.storage();
  element('storage').textContent = storage.quota > 0 ? `${(storage.usage / 1024).toFixed(0)} KiB used of ${(storage.quota / 2 ** 30).toFixed(1)} GiB` : '';
}

async function renderTranscript(): Promise<void> {
  if (!session) return;
  const messages = await session.messages({ last: 200 });
  const list = element('transcript');
  list.replaceChildren(
    ...messages.map((message) => {
      const item = document.createElement('li');
      item.dataset.role = message.role;
      item.dataset.status = message.status;
      item.textContent = typeof message.content === 'string' ? message.content : '';
      return item;
    }),
  );
  list.scrollTop = list.scrollHeight;
  const tokens = await session.tokens();
  element('tokens').textContent = `${messages.length} messages · ${tokens} tokens (${counter.name})`;
}

async function renderNotes(): Promise<void> {
  if (!session) return;
  const notes = (await session.notes()).slice(-20);
  element('notes').replaceChildren(
    ...notes.map((note) => {
      const item = document.createElement('li');
      item.textContent = `${new Date(note.at).toLocaleTimeString()} ${note.text}`;
      return item;
    }),
  );
}

function renderBoard(): void {
  if (!session) return;
  const board = session.blackboard;
  const rows = board.keys().flatMap((key) => {
    const dt = document.createElement('dt');
    dt.textContent = key;
    const dd = document.createElement('dd');
    dd.textContent = JSON.stringify(board.get(key));
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = '×';
    remove.title = `Delete ${key}`;
    remove.addEventListener('click', () => board.delete(key));
    return [dt, dd, remove];
  });
  element('board').replaceChildren(...rows);
}

function refresh(): void {
  Promise.all([renderTranscript(), renderNotes(), renderSessions()]).catch((error: unknown) => status(String(error)));
}

async function open(sessionId: string): Promise<void> {
  for (const stop of detach) stop();
  detach = [];
  await session?.close();
  session = await tabula.session(sessionId);
  location.hash = encodeURIComponent(sessionId);
  element('chat-title').textContent = sessionId;
  detach.push(session.subscribe(refresh));
  await session.blackboard.whenLoaded;
  detach.push(session.blackboard.observe(renderBoard));
  renderBoard();
  refresh();
}

async function send(text: string): Promise<void> {
  if (!session) return;
  const current = session;
  status('The agent is replying…');
  try {
    await current.run(
      async (ctx) => {
        await ctx.append({ role: 'user', content: text });
        const turn = respond(text, current.blackboard, { messages: await current.messageCount(), tokens: await current.tokens() }, ctx.signal);
        await ctx.note(`turn ${ctx.visit}: ${turn.note}`);
        const reply = await current.stream({ role: 'assistant', name: 'agent' });
        try {
          for await (const word of turn.words) reply.write(word);
        } catch (error) {
          await reply.abort();
          throw error;
        }
        await reply.done();
        ctx.set('turns', ((ctx.get('turns') as number | undefined) ?? 0) + 1);
      },
      { scope: 'chat' },
    );
    status(`Done. Turns so far: ${JSON.stringify(((await current.state()).context).turns ?? 0)}.`);
  } catch (error) {
    status(isTabulaError(error, 'run/interrupted') ? 'Stopped. What was written so far is kept.' : `Error: ${error instanceof Error ? error.message : String(error)}`);
  }
}

element<HTMLFormElement>('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = (event.currentTarget as HTMLFormElement).elements.namedItem('text') as HTMLInputElement;
  const text = input.value;
  input.value = '';
  void send(text);
});

// Stop works from any tab: interrupt() reaches the tab whose run holds the session.
element('stop').addEventListener('click', () => {
  void session?.interrupt('stopped by the user').then((stopped) => {
    if (!stopped) status('Nothing to stop: no turn is running in any tab.');
  });
});

element<HTMLFormElement>('board-form').addEventListener('submit', (event) => {
  event.preventDefault();
  if (!session) return;
  const form = event.currentTarget as HTMLFormElement;
  const key = (form.elements.namedItem('key') as HTMLInputElement).value.trim();
  const raw = (form.elements.namedItem('value') as HTMLInputElement).value;
  let value: JsonValue = raw;
  try {
    value = JSON.parse(raw) as JsonValue;
  } catch {
    // Not JSON: keep it as text.
  }
  session.blackboard.set(key, value);
  form.reset();
});

element('new-chat').addEventListener('click', () => void open(`chat-${Date.now().toString(36)}`));

void counter.ready.then((mode) => {
  element('counter-mode').textContent = `tokenizer in ${mode === 'in-thread' ? 'this tab' : `a ${mode} worker`}${counter.fallbackReason ? ` (${counter.fallbackReason})` : ''}`;
});

await open(decodeURIComponent(location.hash.slice(1)) || 'welcome');
(window as unknown as { demoReady: boolean }).demoReady = true;
