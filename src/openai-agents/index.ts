/**
 * `tabula-sdk/openai-agents`: a `Session` for the OpenAI Agents SDK that
 * keeps a conversation's items in Tabula (IndexedDB, shared by every tab,
 * synced with the session). Peer dependency: `@openai/agents-core` ≥ 0.20.
 */
export { TabulaAgentsSession } from './agents-session.js';
export type { TabulaAgentsSessionOptions } from './agents-session.js';
export { toChatMessages } from './chat-messages.js';
