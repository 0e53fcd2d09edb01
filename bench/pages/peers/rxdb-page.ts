import { exposeHarness } from './harness.js';
import { system } from './systems/rxdb.js';

exposeHarness(system);
