import { exposeHarness } from './harness.js';
import { system } from './systems/tabula.js';

exposeHarness(system);
