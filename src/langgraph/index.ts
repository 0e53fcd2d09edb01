/**
 * `tabula-sdk/langgraph`: a LangGraph.js checkpointer that keeps graph
 * threads in Tabula (IndexedDB, shared by every tab, synced with the
 * session data). Peer dependencies: `@langchain/langgraph-checkpoint` and
 * `@langchain/core`.
 */
export { TabulaCheckpointSaver } from './checkpoint-saver.js';
export type { TabulaCheckpointSaverOptions } from './checkpoint-saver.js';
