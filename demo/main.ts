/**
 * The demo app: an offline chat agent on Tabula. Each chat is a session; a
 * turn is a `session.run` that streams the reply durably and can be stopped
 * from any tab; the chat list follows `tabula.subscribe()`, so chats made,
 * renamed or deleted in another tab or on another device show up at once;
 * the blackboard panel is the chat's shared scratchpad; the meter counts
 * tokens exactly in the shared worker. With the demo server and a user
 * signed in, everything syncs between devices.
 */
/// <reference types="vite/client" />
import { PrefixContext, createTokenCounter, isTabulaError, openTabula, type JsonValue, type Session, type SessionInfo, type StoredMessage } from '../src/index.js';
import { deviceUrl, loadAccount, signIn, signOut, syncFor } from './app/account.js';
import { deleteWithWriter, replaceBoard, setWithWriter, writerOf } from './app/board-writers.js';
import { builtinAvailability, hasBuiltinModel } from './app/builtin-model.js';
import { renderMarkdown } from './app/markdown.js';
import { loadSettings, modelFor, saveSettings, type ModelSettings } from './app/settings.js';
import { syncBadge } from './app/sync-status.js';
import { runTurn, textOf, titleFrom, unansweredTail, type TurnKind } from './app/turn.js';

const SYSTEM_PROMPT = 'You are a helpful assistant inside the Tabula demo. Keep answers short. Use the blackboard tools to remember goals and todos.';

function element<T extends HTMLElement>(testId: string): T {
  const found = document.querySelector<T>(`[data-testid="${testId}"]`);
  if (!found) throw new Error(`demo page is missing [data-testid="${testId}"]`);
  return found;
}

function make<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

/** Runs `task` now, or once more after the run in flight: renders never overlap and never miss a change. */
function coalesce(task: () => Promise<void>): () => void {
  let running = false;
  let again = false;
  const go = async () => {
    running = true;
    do {
      again = false;
      await task().catch(showError);
    } while (again);
    running = false;
  };
  return () => {
    if (running) again = true;
    else void go();
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function showError(error: unknown): void {
  const box = element('chat-error');
  box.textContent = describe(error);
  box.hidden = false;
}

function clearError(): void {
  element('chat-error').hidden = true;
}

// --- Account, sync and the database -------------------------------------------------------------

const account = await loadAccount();
const tabId = sessionStorage.getItem('tabula-demo:tab') ?? crypto.randomUUID().slice(0, 4);
sessionStorage.setItem('tabula-demo:tab', tabId);
const place = `device ${account.device} · tab ${tabId}`;
const humanLabel = `${account.user ?? 'you'} · ${place}`;

const counter = createTokenCounter({ encoding: 'o200k_base', worker: 'shared' });
const sync = syncFor(account);
const tabula = await openTabula({
  name: account.dbName,
  userId: account.userId,
  tokenCounter: counter,
  ...(sync ? { sync } : {}),
  // Problems reported rather than thrown (a bad message from another tab, a failed cache write) go on the page.
  onError: showError,
});

let settings: ModelSettings = loadSettings();
let model = modelFor(settings);

function renderAccount(): void {
  const device = element('device');
  device.hidden = false;
  device.textContent = `Device ${account.device}`;
  element<HTMLAnchorElement>('another-device').href = deviceUrl(account.device + 1);
  element('sign-in').hidden = account.syncUrl === null || account.user !== null;
  element('signed-in').hidden = account.user === null;
  element('user').textContent = account.user ?? '';
  element('sync-now').hidden = tabula.sync === null;
}

function renderSync(): void {
  const badge = element('sync-status');
  element('offline-banner').hidden = navigator.onLine;
  if (!tabula.sync) {
    badge.dataset.tone = 'off';
    badge.textContent = account.syncUrl === null ? 'Sync off (no server)' : 'Sync off (sign in to sync)';
    badge.title = account.syncUrl === null ? 'This copy of the demo has no sync server: everything stays in this browser.' : 'Sign in to sync your chats between devices.';
    return;
  }
  const shown = syncBadge(tabula.sync.status(), navigator.onLine);
  badge.dataset.tone = shown.tone;
  badge.textContent = shown.text;
  badge.title = shown.detail;
}

element<HTMLFormElement>('sign-in').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = (event.currentTarget as HTMLFormElement).elements.namedItem('user') as HTMLInputElement;
  signIn(input.value.trim())
    .then(() => location.reload())
    .catch(showError);
});
element('sign-out').addEventListener('click', () => {
  signOut();
  location.reload();
});
element('sync-now').addEventListener('click', () => void tabula.sync?.flush().catch(() => undefined));
tabula.sync?.subscribe(renderSync);
window.addEventListener('online', () => {
  renderSync();
  // Back online: sync now rather than at the end of the client's backoff.
  void tabula.sync?.flush().catch(() => undefined);
});
window.addEventListener('offline', renderSync);

// --- Chats ---------------------------------------------------------------------------------------

/** Open handles of the listed chats: titles live in each session's state. */
const handles = new Map<string, Session>();
let current: Session | null = null;
let detachCurrent: (() => void)[] = [];
let busy = false;

async function handleOf(sessionId: string): Promise<Session> {
  const open = handles.get(sessionId);
  if (open) return open;
  const session = await tabula.session(sessionId);
  const raced = handles.get(sessionId);
  if (raced) {
    await session.close();
    return raced;
  }
  handles.set(sessionId, session);
  return session;
}

async function titleOf(session: Session): Promise<string> {
  const { context } = await session.state();
  if (typeof context.title === 'string' && context.title !== '') return context.title;
  // A turn that failed saved no title: fall back to the first message.
  const first = (await session.messages()).find((message) => message.role === 'user');
  return first ? titleFrom(textOf(first)) : 'New chat';
}

async function matches(session: Session, title: string, query: string): Promise<boolean> {
  if (query === '' || title.toLowerCase().includes(query)) return true;
  return (await session.messages()).some((message) => textOf(message).toLowerCase().includes(query));
}

const renderChatList = coalesce(async () => {
  const infos: SessionInfo[] = await tabula.sessions();
  const listed = new Set(infos.map((info) => info.sessionId));
  for (const [sessionId, session] of handles) {
    if (!listed.has(sessionId) && session !== current) {
      handles.delete(sessionId);
      await session.close();
    }
  }
  const query = element<HTMLInputElement>('search').value.trim().toLowerCase();
  const rows = await Promise.all(
    infos.map(async (info) => {
      const session = await handleOf(info.sessionId);
      const title = await titleOf(session);
      return { info, title, shown: await matches(session, title, query) };
    }),
  );
  element('chat-list').replaceChildren(
    ...rows
      .filter((row) => row.shown)
      .map(({ info, title }) => {
        const button = make('button', { type: 'button', className: 'chat-item' }, make('span', { className: 'title', textContent: title }), make('span', { className: 'meta', textContent: `${info.messageCount} messages · ${new Date(info.updatedAt).toLocaleString()}` }));
        button.dataset.sessionId = info.sessionId;
        if (info.sessionId === current?.sessionId) button.setAttribute('aria-current', 'page');
        button.addEventListener('click', () => void openChat(info.sessionId).catch(showError));
        return make('li', {}, button);
      }),
  );
  if (current && listed.has(current.sessionId)) element('chat-title').textContent = rows.find((row) => row.info.sessionId === current?.sessionId)?.title ?? 'Chat';
  const storage = await tabula.storage();
  element('storage').textContent = storage.quota > 0 ? `${(storage.usage / 1024).toFixed(0)} KiB used of ${(storage.quota / 2 ** 30).toFixed(1)} GiB in this browser` : '';
});

// --- The open chat -------------------------------------------------------------------------------

const ROLE_LABELS = { user: 'You', assistant: 'Agent', tool: 'Tool', system: 'System' } as const;

function renderMessage(message: StoredMessage): HTMLLIElement {
  const item = make('li');
  item.dataset.role = message.role;
  item.dataset.status = message.status;
  const who = message.role === 'assistant' && message.name ? `${ROLE_LABELS.assistant} (${message.name})` : ROLE_LABELS[message.role];
  const time = make('time', { dateTime: new Date(message.createdAt).toISOString(), textContent: new Date(message.createdAt).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) });
  const head = make('div', { className: 'message-head' }, make('span', { className: 'role', textContent: who }), time);
  if (message.status === 'interrupted') head.append(make('span', { className: 'tag', textContent: 'interrupted' }));
  const body = make('div', { className: 'body' });
  if (message.role === 'assistant') renderMarkdown(body, textOf(message));
  else body.textContent = textOf(message);
  item.append(head, body);
  for (const call of message.tool_calls ?? []) {
    item.append(make('div', { className: 'tool-call' }, make('span', { className: 'tag', textContent: 'tool call' }), make('code', { textContent: `${call.function.name}(${call.function.arguments})` })));
  }
  return item;
}

async function renderTokens(session: Session): Promise<void> {
  const [total, prefix] = await Promise.all([session.tokens(), session.prefix().then((p) => counter.count(p.asMessages()))]);
  const limit = model.contextTokens;
  const percent = (count: number) => Math.min(100, (count / limit) * 100);
  const bar = element('token-meter').querySelector<HTMLElement>('.bar');
  if (bar) {
    bar.setAttribute('aria-valuenow', percent(total).toFixed(1));
    bar.setAttribute('aria-valuetext', `${total} of ${limit} tokens`);
    bar.querySelector<HTMLElement>('.prefix')?.style.setProperty('width', `${percent(prefix)}%`);
    bar.querySelector<HTMLElement>('.messages')?.style.setProperty('width', `${Math.max(0, percent(total) - percent(prefix))}%`);
  }
  element('tokens').textContent = `${total.toLocaleString('en')} / ${limit.toLocaleString('en')} tokens · prefix ${prefix} · messages ${total - prefix} · ${counter.name}`;
}

const renderChat = coalesce(async () => {
  const session = current;
  if (!session) return;
  const [messages, runs, notes] = await Promise.all([session.messages({ last: 200 }), session.runs(), session.notes()]);
  if (session !== current) return;
  const list = element('transcript');
  const stuck = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  list.replaceChildren(...messages.filter((message) => message.role !== 'system').map(renderMessage));
  if (stuck) list.scrollTop = list.scrollHeight;
  busy = runs.some((run) => run.status === 'running');
  const last = messages.at(-1);
  const tail = unansweredTail(messages);
  const interrupted = last?.role === 'assistant' && last.status === 'interrupted';
  element('recover').hidden = busy || !(interrupted || last?.role === 'user' || (tail.length > 0 && last?.role === 'tool'));
  element<HTMLButtonElement>('continue').hidden = !(interrupted && textOf(last) !== '');
  element('notes').replaceChildren(...notes.slice(-20).map((note) => make('li', { textContent: `${new Date(note.at).toLocaleTimeString()} ${note.text}` })));
  updateButtons();
  await renderTokens(session);
});

function renderBoard(): void {
  const session = current;
  if (!session) return;
  const board = session.blackboard;
  element('board').querySelector('tbody')?.replaceChildren(
    ...board.keys().map((key) => {
      const writer = writerOf(board, key);
      const remove = make('button', { type: 'button', className: 'link', textContent: '×', title: `Delete ${key}` });
      remove.setAttribute('aria-label', `Delete ${key}`);
      remove.addEventListener('click', () => deleteWithWriter(board, key));
      return make(
        'tr',
        {},
        make('th', { scope: 'row', textContent: key }),
        make('td', {}, make('code', { textContent: JSON.stringify(board.get(key)) })),
        make('td', { className: 'meta' }, writer ? `${writer.by}, ${new Date(writer.at).toLocaleTimeString()}` : '—', remove),
      );
    }),
  );
  const editor = element<HTMLFormElement>('board-form').elements.namedItem('json') as HTMLTextAreaElement;
  // Never overwrite what the user is typing; a save shows the merged board.
  if (document.activeElement !== editor || editor.dataset.dirty !== 'true') {
    editor.value = JSON.stringify(board.toJSON(), null, 2);
    editor.dataset.dirty = 'false';
  }
}

/** Stops listening to the open chat (before its handle closes: Yjs complains about late unobserves). */
function leaveCurrent(): Session | null {
  for (const stop of detachCurrent) stop();
  detachCurrent = [];
  const left = current;
  current = null;
  return left;
}

async function openChat(sessionId: string): Promise<void> {
  leaveCurrent();
  clearError();
  const session = await handleOf(sessionId);
  current = session;
  history.replaceState(null, '', `#${encodeURIComponent(sessionId)}`);
  detachCurrent.push(session.subscribe(renderChat));
  await session.blackboard.whenLoaded;
  if (current !== session) return;
  detachCurrent.push(session.blackboard.observe(renderBoard));
  renderBoard();
  renderChat();
  renderChatList();
}

async function newChat(): Promise<void> {
  const sessionId = `chat-${Date.now().toString(36)}-${crypto.randomUUID().slice(0, 4)}`;
  const session = await handleOf(sessionId);
  await session.setPrefix(new PrefixContext({ systemPrompt: SYSTEM_PROMPT }));
  await openChat(sessionId);
  element('composer-text').focus();
}

// --- Turns ---------------------------------------------------------------------------------------

function updateButtons(): void {
  const text = element<HTMLTextAreaElement>('composer-text').value.trim();
  element<HTMLButtonElement>('send').disabled = busy || text === '' || current === null;
  element<HTMLButtonElement>('stop').disabled = !busy;
  element<HTMLButtonElement>('retry').disabled = busy;
  element<HTMLButtonElement>('continue').disabled = busy;
}

async function turn(kind: TurnKind): Promise<void> {
  const session = current;
  if (!session || busy) return;
  clearError();
  busy = true;
  updateButtons();
  element('status').textContent = 'The agent is replying…';
  try {
    await runTurn(kind, { session, model, agentLabel: `agent (${model.name}) · ${place}` });
    element('status').textContent = '';
  } catch (error) {
    if (isTabulaError(error, 'run/interrupted')) element('status').textContent = 'Stopped. What was written so far is kept.';
    else {
      element('status').textContent = '';
      showError(error);
    }
  } finally {
    busy = false;
    renderChat();
  }
}

function stop(): void {
  // Stop works from any tab: interrupt() reaches the tab whose run holds the session.
  void current?.interrupt('stopped by the user').then((stopped) => {
    if (!stopped) element('status').textContent = 'Nothing to stop.';
  });
}

const composer = element<HTMLFormElement>('composer');
const textarea = element<HTMLTextAreaElement>('composer-text');
composer.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = textarea.value.trim();
  if (text === '' || busy) return;
  textarea.value = '';
  void turn({ kind: 'send', text });
});
textarea.addEventListener('input', updateButtons);
textarea.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && !element<HTMLDialogElement>('settings').open && !element<HTMLDialogElement>('confirm-delete').open) stop();
});
element('stop').addEventListener('click', stop);
element('retry').addEventListener('click', () => void turn({ kind: 'retry' }));
element('continue').addEventListener('click', () => void turn({ kind: 'continue' }));
element('new-chat').addEventListener('click', () => void newChat().catch(showError));
element('search').addEventListener('input', renderChatList);

element('rename').addEventListener('click', () => {
  const session = current;
  if (!session) return;
  const heading = element('chat-title');
  const input = make('input', { value: heading.textContent ?? '', className: 'rename' });
  input.setAttribute('aria-label', 'Chat title');
  input.dataset.testid = 'rename-input';
  let finished = false;
  const finish = (save: boolean) => {
    // Enter removes the input, which blurs it: finish once.
    if (finished) return;
    finished = true;
    input.replaceWith(heading);
    const title = input.value.trim();
    if (!save || title === '') return;
    heading.textContent = title;
    // A merge on conflict: another tab's concurrent context change (a turn's counters) is kept.
    void session
      .state()
      .then((state) => session.save({ context: { ...state.context, title } }, { expectedVersion: state.version, onConflict: (now) => ({ context: { ...now.context, title } }) }))
      .catch(showError);
  };
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') finish(true);
    if (event.key === 'Escape') {
      event.stopPropagation();
      finish(false);
    }
  });
  input.addEventListener('blur', () => finish(true), { once: true });
  heading.replaceWith(input);
  input.select();
});

element('delete').addEventListener('click', () => {
  if (!current) return;
  const dialog = element<HTMLDialogElement>('confirm-delete');
  element('confirm-name').textContent = element('chat-title').textContent;
  dialog.returnValue = '';
  dialog.showModal();
});
element<HTMLDialogElement>('confirm-delete').addEventListener('close', (event) => {
  const dialog = event.currentTarget as HTMLDialogElement;
  const session = current;
  if (dialog.returnValue !== 'delete' || !session) return;
  void deleteChat(session).catch(showError);
});

async function deleteChat(session: Session): Promise<void> {
  handles.delete(session.sessionId);
  leaveCurrent();
  await session.close();
  await tabula.deleteSession(session.sessionId);
  const next = (await tabula.sessions())[0];
  if (next) await openChat(next.sessionId);
  else await newChat();
}

// --- Blackboard editor ---------------------------------------------------------------------------

const boardForm = element<HTMLFormElement>('board-form');
const boardEditor = boardForm.elements.namedItem('json') as HTMLTextAreaElement;
boardEditor.addEventListener('input', () => {
  boardEditor.dataset.dirty = 'true';
  boardEditor.removeAttribute('aria-invalid');
  element('board-feedback').textContent = '';
});
boardForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const session = current;
  if (!session) return;
  const feedback = element('board-feedback');
  let parsed: unknown;
  try {
    parsed = JSON.parse(boardEditor.value);
  } catch (error) {
    boardEditor.setAttribute('aria-invalid', 'true');
    feedback.textContent = `Not JSON: ${describe(error)}`;
    return;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    boardEditor.setAttribute('aria-invalid', 'true');
    feedback.textContent = 'The blackboard is a JSON object: {"key": value, …}.';
    return;
  }
  try {
    replaceBoard(session.blackboard, parsed as Record<string, JsonValue>, humanLabel);
  } catch (error) {
    boardEditor.setAttribute('aria-invalid', 'true');
    feedback.textContent = describe(error);
    return;
  }
  boardEditor.dataset.dirty = 'false';
  feedback.textContent = 'Saved.';
  renderBoard();
});

/** Sets one key from the console or a test, attributed to this tab: `demo.setBoard('owner', 'ann')`. */
function setBoard(key: string, value: JsonValue): void {
  if (current) setWithWriter(current.blackboard, key, value, humanLabel);
}

// --- Model settings ------------------------------------------------------------------------------

const settingsDialog = element<HTMLDialogElement>('settings');
const settingsForm = element<HTMLFormElement>('settings-form');
element('open-settings').addEventListener('click', () => {
  const fields = settingsForm.elements;
  for (const radio of settingsForm.querySelectorAll<HTMLInputElement>('input[name="kind"]')) radio.checked = radio.value === settings.kind;
  (fields.namedItem('baseUrl') as HTMLInputElement).value = settings.baseUrl;
  (fields.namedItem('apiKey') as HTMLInputElement).value = settings.apiKey;
  (fields.namedItem('model') as HTMLInputElement).value = settings.model;
  (fields.namedItem('contextTokens') as HTMLInputElement).value = String(settings.contextTokens);
  settingsDialog.returnValue = '';
  settingsDialog.showModal();
});
settingsDialog.addEventListener('close', () => {
  if (settingsDialog.returnValue !== 'save') return;
  const fields = settingsForm.elements;
  const value = (name: string) => (fields.namedItem(name) as HTMLInputElement).value.trim();
  const kind = settingsForm.querySelector<HTMLInputElement>('input[name="kind"]:checked')?.value;
  settings = {
    kind: kind === 'openai' || kind === 'builtin' ? kind : 'scripted',
    baseUrl: value('baseUrl'),
    apiKey: value('apiKey'),
    model: value('model'),
    contextTokens: Number(value('contextTokens')) || 128_000,
  };
  saveSettings(settings);
  settings = loadSettings();
  model = modelFor(settings);
  element('status').textContent = `Model: ${model.name}.`;
  renderChat();
});
// Asking Chrome whether its model is ready can log warnings of its own, so ask only when the user picks it.
element<HTMLInputElement>('builtin-option').disabled = !hasBuiltinModel();
element('builtin-note').textContent = hasBuiltinModel() ? '' : '(not in this browser)';
element('builtin-option').addEventListener('change', () => {
  void builtinAvailability().then(({ available, note }) => {
    element('builtin-note').textContent = note;
    if (!available) element<HTMLInputElement>('builtin-option').checked = false;
  });
});

// --- Start ---------------------------------------------------------------------------------------

void counter.ready.then((mode) => {
  element('counter-mode').textContent = `tokens counted in ${mode === 'in-thread' ? 'this tab' : `a ${mode} worker`}${counter.fallbackReason ? ` (${counter.fallbackReason})` : ''}`;
});

tabula.subscribe((change) => {
  // A streaming reply updates its message every flush; the list shows nothing that changes with it.
  if (!change.kinds.every((kind) => kind === 'message.update')) renderChatList();
  if (current && change.sessionId === current.sessionId && change.kinds.includes('session.delete') && change.origin !== 'local') {
    // Deleted in another tab or on another device: move on rather than write into a deleted chat.
    const gone = current;
    leaveCurrent();
    handles.delete(gone.sessionId);
    void gone
      .close()
      .then(async () => {
        const next = (await tabula.sessions())[0];
        if (next) await openChat(next.sessionId);
        else await newChat();
      })
      .catch(showError);
  }
});

renderAccount();
renderSync();
// The chat named in the URL, if this user has it here (a link from before signing in names another user's chat).
const requested = decodeURIComponent(location.hash.slice(1));
let known = await tabula.sessions();
if (known.length === 0 && tabula.sync) {
  // A device opened for the first time: fetch the user's chats before making a new one, but never wait long.
  await Promise.race([tabula.sync.flush().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 4000))]);
  known = await tabula.sessions();
}
const start = known.find((info) => info.sessionId === requested) ?? known[0];
if (start) await openChat(start.sessionId);
else await newChat();

// The built app precaches itself for offline use (scripts/demo-pwa.ts); the dev server has no service worker.
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  navigator.serviceWorker.register('./sw.js').catch((error: unknown) => showError(new Error(`Offline support is off: ${describe(error)}`)));
}

const demo = { tabula, setBoard, get session() { return current; } };
Object.assign(window, { demo, demoReady: true });
