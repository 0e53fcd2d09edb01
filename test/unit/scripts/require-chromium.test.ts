/**
 * How `npm test` finds Chromium on a fresh machine (scripts/chromium.mjs):
 * CHROMIUM_PATH, then a system Chromium, then Playwright's own, and when
 * none is there it stops at once and says exactly what to run.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { findChromium, missingChromiumMessage } from '../../../scripts/chromium.mjs';

const script = fileURLToPath(new URL('../../../scripts/require-chromium.mjs', import.meta.url));

function run(chromiumPath: string): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [script], { env: { ...process.env, CHROMIUM_PATH: chromiumPath }, encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr };
}

/** A machine with these files, this PATH, and Playwright's Chromium expected at `playwright`. */
function machine(files: string[], env: Record<string, string>, playwright = '/home/u/.cache/ms-playwright/chromium-1/chrome') {
  return { env, exists: (path: string) => files.includes(path), playwrightPath: () => playwright };
}

describe('finding Chromium', () => {
  it('takes CHROMIUM_PATH first, even when a system Chromium exists', () => {
    const found = findChromium(machine(['/opt/chrome', '/usr/bin/chromium'], { CHROMIUM_PATH: '/opt/chrome', PATH: '/usr/bin' }));
    expect(found).toEqual({ path: '/opt/chrome', source: 'CHROMIUM_PATH' });
  });

  it('does not fall back to another browser when CHROMIUM_PATH names a missing file', () => {
    const search = machine(['/usr/bin/chromium'], { CHROMIUM_PATH: '/nope/chrome', PATH: '/usr/bin' });
    expect(findChromium(search)).toBeNull();
    expect(missingChromiumMessage(search)).toContain('CHROMIUM_PATH points to /nope/chrome, which does not exist.');
  });

  it('finds a system Chromium or Chrome on the PATH, in preference order', () => {
    expect(findChromium(machine(['/usr/local/bin/google-chrome', '/usr/bin/chromium-browser'], { PATH: '/usr/local/bin:/usr/bin' }))).toEqual({
      path: '/usr/bin/chromium-browser',
      source: 'system',
    });
    expect(findChromium(machine(['/snap/bin/chromium'], { PATH: '/usr/bin' }))).toEqual({ path: '/snap/bin/chromium', source: 'system' });
  });

  it("uses Playwright's own Chromium when it is installed and no system one is", () => {
    const bundled = '/home/u/.cache/ms-playwright/chromium-1/chrome';
    expect(findChromium(machine([bundled], { PATH: '/usr/bin' }, bundled))).toEqual({ path: bundled, source: 'playwright' });
  });

  it('says exactly what to run when there is none (Playwright not downloaded, nothing installed)', () => {
    const search = machine([], { PATH: '/usr/bin' });
    expect(findChromium(search)).toBeNull();
    const message = missingChromiumMessage(search) ?? '';
    expect(message).toContain('sudo apt-get update && sudo apt-get install -y chromium');
    expect(message).toContain('npx playwright install chromium');
    expect(message).toContain('CHROMIUM_PATH=/path/to/chrome npm test');
  });
});

describe('npm test without Chromium', () => {
  it('stops at once and says how to get one', () => {
    const { status, stderr } = run('/nonexistent/chromium');
    expect(status).toBe(1);
    expect(stderr).toContain('CHROMIUM_PATH points to /nonexistent/chromium');
    expect(stderr).toContain('apt-get install -y chromium');
    expect(stderr).toContain('npx playwright install chromium');
  });

  it('passes when the binary exists', () => {
    expect(run(process.execPath).status).toBe(0);
  });
});
