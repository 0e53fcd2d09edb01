/**
 * The console guard (test/console-guard.ts) fails a test that writes to console.error, warn or trace
 * without saying so, and lets one that said so pass quietly. It is checked by running a fixture suite
 * (test/unit/fixtures/console-guard/) in a child Vitest and reading which of its tests failed, and why.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const config = fileURLToPath(new URL('./fixtures/console-guard/vitest.config.ts', import.meta.url));
const vitest = fileURLToPath(new URL('../../node_modules/vitest/vitest.mjs', import.meta.url));

interface Report {
  testResults: { assertionResults: { title: string; status: string; failureMessages: string[] }[] }[];
}

it('fails each test that wrote to the console unannounced, naming the line, and no other', () => {
  const run = spawnSync(process.execPath, [vitest, 'run', '--config', config, '--reporter=json'], { encoding: 'utf8', timeout: 120_000 });
  const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as Report;
  const results = Object.fromEntries(report.testResults.flatMap((file) => file.assertionResults.map((test) => [test.title, test])));
  const failed = Object.keys(results).filter((title) => results[title]?.status === 'failed').sort();
  expect(failed).toEqual(['a pattern allows its method only', 'allowance does not leak into the next test', 'error object', 'guarded again after a restored spy', 'trace', 'warns unexpectedly']);
  expect(Object.keys(results)).toHaveLength(13);
  const why = (title: string) => results[title]?.failureMessages.join('\n') ?? '';
  expect(why('warns unexpectedly')).toContain('This test wrote to the console 1 time(s) without saying it would:\n  console.warn: boom {"at":1}');
  expect(why('warns unexpectedly')).toContain("call allowConsole('<method>', '<message>', '<reason>')");
  expect(why('error object')).toContain('console.error: RangeError: bad range');
  expect(why('trace')).toContain('console.trace: where');
  expect(why('a pattern allows its method only')).toContain('console.warn: same text');
  expect(run.status).toBe(1);
});
