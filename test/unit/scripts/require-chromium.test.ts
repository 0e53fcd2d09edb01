import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../../../scripts/require-chromium.mjs', import.meta.url));

function run(chromiumPath: string): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [script], { env: { ...process.env, CHROMIUM_PATH: chromiumPath }, encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr };
}

describe('npm test without Chromium', () => {
  it('stops at once and says how to get one', () => {
    const { status, stderr } = run('/nonexistent/chromium');
    expect(status).toBe(1);
    expect(stderr).toContain('CHROMIUM_PATH points to /nonexistent/chromium');
    expect(stderr).toContain('apt-get install -y chromium');
  });

  it('passes when the binary exists', () => {
    expect(run(process.execPath).status).toBe(0);
  });
});
