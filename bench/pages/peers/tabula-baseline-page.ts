/**
 * An earlier Tabula (the src directory of another checkout, named by
 * `?src=` and served by Vite under /@fs/) through the same harness, so a
 * change is measured against what it replaced in one run.
 */
import type * as Current from '../../../src/index.js';
import { exposeHarness } from './harness.js';
import { tabulaSystem } from './systems/tabula.js';

const src = new URLSearchParams(location.search).get('src');
if (!src) throw new Error('tabula-baseline.html needs ?src=<absolute path of a checkout src directory>');
const baseline = (await import(/* @vite-ignore */ `/@fs${src}/index.ts`)) as typeof Current;
exposeHarness(tabulaSystem('tabula-baseline', baseline.openTabula));
