/**
 * Runs the `tabula-server` CLI as a real child process and waits for the
 * line saying where it listens. The TypeScript source is bundled once per
 * test file with esbuild (dependencies stay external), because starting
 * through tsx costs seconds per process on a loaded machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { afterAll } from 'vitest';
import { SECRET } from './helpers.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
let bundled: string | undefined;
// Runs after the importing test file (this module is only imported by tests).
afterAll(() => {
  if (bundled) rmSync(bundled, { force: true });
});

/** The CLI bundled once per test file (for tests that spawn it themselves, e.g. under strace). */
export function cliBundle(): string {
  if (bundled) return bundled;
  mkdirSync(`${root}test/.tmp`, { recursive: true });
  const outfile = `${root}test/.tmp/tabula-server-${process.pid}-${Date.now()}.mjs`;
  buildSync({ entryPoints: [`${root}src/server/cli.ts`], bundle: true, platform: 'node', format: 'esm', packages: 'external', outfile, logLevel: 'error' });
  return (bundled = outfile);
}

/** A running server process. */
export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Every stdout line so far. */
  readonly lines: string[];
  /** Resolves with the exit code (or the signal name) when the process ends. */
  readonly exited: Promise<number | string>;
}

/** Spawns the CLI with `args` as they are (startServerProcess adds `--port 0`). */
export function runCli(args: readonly string[], env: Record<string, string | undefined> = { TABULA_JWT_SECRET: SECRET }): {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | string>;
  stderr: () => string;
} {
  const child = spawn(process.execPath, [cliBundle(), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, lines, exited, stderr: () => stderr };
}

/** Starts the CLI on a free port and resolves once it listens. */
export async function startServerProcess(args: readonly string[]): Promise<ServerProcess> {
  const run = runCli(['--port', '0', ...args]);
  const url = await new Promise<string>((resolve, reject) => {
    const check = (): void => {
      const line = run.lines.find((l) => l.includes(' listening on '));
      if (line) resolve(/listening on (\S+)/.exec(line)![1]!);
    };
    run.child.stdout!.on('data', () => setImmediate(check));
    void run.exited.then((code) => reject(new Error(`tabula-server exited (${code}) before listening: ${run.stderr()}`)));
  });
  return { child: run.child, url, lines: run.lines, exited: run.exited };
}

/**
 * Runs the CLI with `args` expecting it to refuse them: resolves with its exit code and stderr, or
 * with `'listening'` (after killing it) when it started serving instead, so a test of a refusal can
 * never leave a server running.
 */
export async function refusal(args: readonly string[], env?: Record<string, string | undefined>): Promise<{ code: number | string; stderr: string }> {
  const run = runCli(args, env);
  const listening = new Promise<'listening'>((resolve) => {
    run.child.stdout!.on('data', () => setImmediate(() => run.lines.some((line) => line.includes(' listening on ')) && resolve('listening')));
  });
  const code = await Promise.race([run.exited, listening]);
  if (code === 'listening') {
    run.child.kill('SIGKILL');
    await run.exited;
  }
  return { code, stderr: run.stderr() };
}
