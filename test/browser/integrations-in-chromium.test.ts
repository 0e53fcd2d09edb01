/**
 * The LangGraph and Agents integration suites again, on Chromium's real
 * IndexedDB and BroadcastChannel (the conformance suite has its own file).
 */
import '../unit/langgraph/checkpoint-saver.test.ts';
import '../unit/openai-agents/agents-session.test.ts';
