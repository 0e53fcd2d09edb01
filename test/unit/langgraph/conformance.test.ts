/** LangGraph's checkpointer conformance suite, in full, in Node over fake-indexeddb. */
import { registerConformanceSuite } from './conformance.js';

await registerConformanceSuite();
