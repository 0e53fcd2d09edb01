/** Hands a benchmark page's functions to the Node driver (lib/browser.ts waits for benchReady). */
export function expose(bench: object): void {
  const target = window as unknown as { bench: object; benchReady: boolean };
  target.bench = bench;
  target.benchReady = true;
}
