/**
 * A green run reads green: a test fails when it writes to `console.error`, `console.warn` or
 * `console.trace` without saying it would. Tabula reports problems it does not throw through
 * `onError` (console.warn by default) and the sync server logs failed requests with console.error, so
 * a stray line there is a symptom: a reported bad row, a request that failed, a listener that threw.
 * A test that provokes one on purpose says so with {@link allowConsole}, naming the message and why;
 * that line is then silenced. Every other line is still printed where it happened, and the test that
 * produced it fails naming it.
 *
 * Loaded as a setup file by the unit, server and browser projects (vite.config.ts). It replaces the
 * three methods instead of spying on them with `vi.spyOn`, so a test's own spy (and
 * `vi.restoreAllMocks()`) wraps and restores the guard rather than removing it. `console.log`,
 * `console.info` and `console.debug` stay free: seeds and progress go there.
 */
import { afterAll, afterEach, beforeEach } from 'vitest';

/** The console methods the guard watches. */
export type GuardedMethod = 'error' | 'warn' | 'trace';

interface Allowance {
  readonly method: GuardedMethod;
  readonly message: string | RegExp;
  readonly reason: string;
}

interface Call {
  readonly method: GuardedMethod;
  readonly text: string;
}

const METHODS: readonly GuardedMethod[] = ['error', 'warn', 'trace'];
const original: Record<GuardedMethod, (...args: unknown[]) => void> = {
  error: console.error.bind(console),
  warn: console.warn.bind(console),
  trace: console.trace.bind(console),
};

/** Allowances made outside a test (at the top of a file or in a describe): they hold for the whole file. */
let fileAllowances: Allowance[] = [];
/** Allowances made in the running test or its beforeEach: cleared when it ends. */
let testAllowances: Allowance[] = [];
/** Unexpected calls of the running test. */
let unexpected: Call[] = [];
/** Unexpected calls outside any test (module scope, beforeAll, afterAll): they fail the file. */
let stray: Call[] = [];
let inTest = false;

/** One argument as the console shows it, near enough to match on: errors by name and message. */
function show(arg: unknown): string {
  if (typeof arg === 'string') return arg;
  if (arg instanceof Error) return `${arg.name}: ${arg.message}`;
  try {
    return JSON.stringify(arg) ?? String(arg);
  } catch {
    return String(arg);
  }
}

function allowed(call: Call): boolean {
  return [...testAllowances, ...fileAllowances].some(
    (allowance) => allowance.method === call.method && (typeof allowance.message === 'string' ? call.text.includes(allowance.message) : allowance.message.test(call.text)),
  );
}

for (const method of METHODS) {
  console[method] = (...args: unknown[]) => {
    const call = { method, text: args.map(show).join(' ') };
    if (allowed(call)) return;
    original[method](...args);
    (inTest ? unexpected : stray).push(call);
  };
}

/**
 * Says that this test writes `message` (a substring or a pattern of the line's text; an Error
 * argument reads as `Name: message`) to `console[method]` on purpose, and why: the line is silenced
 * and does not fail the test. Called in a test or a `beforeEach`, it holds for that test; called at
 * the top of a file or in a `describe` body, for every test of the file.
 */
export function allowConsole(method: GuardedMethod, message: string | RegExp, reason: string): void {
  if (reason.trim() === '') throw new Error('allowConsole: give the reason this test writes to the console on purpose.');
  (inTest ? testAllowances : fileAllowances).push({ method, message, reason });
}

function failure(calls: readonly Call[], where: string): Error {
  const lines = calls.map((call) => `  console.${call.method}: ${call.text.length > 300 ? `${call.text.slice(0, 300)}…` : call.text}`);
  return new Error(
    `${where} wrote to the console ${calls.length} time(s) without saying it would:\n${lines.join('\n')}\n` +
      "Fix what it reports; or, if the test provokes it on purpose, call allowConsole('<method>', '<message>', '<reason>') from test/console-guard.ts in the test.",
  );
}

beforeEach(() => {
  inTest = true;
  testAllowances = [];
  unexpected = [];
});

afterEach(() => {
  inTest = false;
  const calls = unexpected;
  unexpected = [];
  testAllowances = [];
  if (calls.length > 0) throw failure(calls, 'This test');
});

afterAll(() => {
  const calls = stray;
  stray = [];
  fileAllowances = [];
  if (calls.length > 0) throw failure(calls, 'This file, outside its tests,');
});
