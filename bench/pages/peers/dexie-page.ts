import { exposeHarness } from './harness.js';
import { system } from './systems/dexie.js';

exposeHarness(system);
