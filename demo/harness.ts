/**
 * Exposes the package entry to Playwright tests and browser benchmarks,
 * which drive it through page.evaluate(). Not part of the demo's UI.
 */
import * as tabula from '../src/index.js';

declare global {
  interface Window {
    tabula: typeof tabula;
    harnessReady: true;
  }
}

window.tabula = tabula;
window.harnessReady = true;
