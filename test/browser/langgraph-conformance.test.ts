/** LangGraph's checkpointer conformance suite, in full, in Chromium over real IndexedDB. */
import { registerConformanceSuite } from '../unit/langgraph/conformance.js';

await registerConformanceSuite();
