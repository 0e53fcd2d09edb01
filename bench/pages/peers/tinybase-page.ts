import { exposeHarness } from './harness.js';
import { system } from './systems/tinybase.js';

exposeHarness(system);
