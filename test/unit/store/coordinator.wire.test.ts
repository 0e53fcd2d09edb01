/**
 * The run coordinator (coordinator.ts) at its wire, the BroadcastChannel
 * `tabula:<name>:runs`: a raw channel in the test plays the other tab. An
 * interrupt stops the run it names (or, unnamed, whichever run holds the
 * session) and is acknowledged; one for a run or session not in flight here
 * is neither acted on nor acknowledged; a malformed message is reported and
 * dropped; interrupt() sends the run it saw in flight and resolves with the
 * acknowledgement.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isTabulaError, type Session } from '../../../src/index.js';
import { platformLocks } from '../../../src/store/locks.js';
import { freshTabula, waitFor } from './helpers.js';

const opened: BroadcastChannel[] = [];

/** The other tab: a channel of its own on the coordinator's name, recording what it receives. */
function otherTab(dbName: string): { channel: BroadcastChannel; received: Record<string, unknown>[] } {
  const channel = new BroadcastChannel(`tabula:${dbName}:runs`);
  opened.push(channel);
  const received: Record<string, unknown>[] = [];
  channel.onmessage = (event: MessageEvent<Record<string, unknown>>) => received.push(event.data);
  return { channel, received };
}

afterEach(() => {
  for (const channel of opened.splice(0)) channel.close();
});

/** Starts a run that waits until it is interrupted; `started` resolves once fn runs. */
function runUntilInterrupted(session: Session, runId: string): { started: Promise<void>; outcome: Promise<unknown>; aborted: () => boolean } {
  let signal: AbortSignal | null = null;
  let resolveStarted!: () => void;
  const started = new Promise<void>((resolve) => (resolveStarted = resolve));
  const outcome = session
    .run(
      async (ctx) => {
        signal = ctx.signal;
        const aborted = new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        resolveStarted();
        await aborted;
      },
      { runId },
    )
    .then(() => 'ended', (error: unknown) => error);
  return { started, outcome, aborted: () => (signal)?.aborted === true };
}

/**
 * A frozen tab: it holds the session's run lock (Web Locks, or in Node the in-process lock manager every
 * Tabula shares) but listens to nothing, so nobody answers an interrupt. `release` lets go of the lock.
 */
async function frozenTab(dbName: string, sessionId: string): Promise<{ release: () => void }> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let granted!: () => void;
  const taken = new Promise<void>((resolve) => (granted = resolve));
  void platformLocks().request(`tabula:${dbName}:run:${JSON.stringify(['anonymous', sessionId])}`, {}, async () => {
    granted();
    await held;
  });
  await taken;
  return { release };
}

describe('an interrupt message from another tab', () => {
  it('for another run or another session stops nothing and is not acknowledged; for the run in flight (or unnamed) stops it and is acknowledged', async () => {
    const tabula = await freshTabula({ userId: 'alice' });
    const session = await tabula.session('s');
    const tab = otherTab(tabula.dbName);
    const run = runUntilInterrupted(session, 'current');
    await run.started;
    const interrupt = (id: string, sessionId: string, runId: string | null) =>
      tab.channel.postMessage({ v: 1, type: 'interrupt', id, userId: 'alice', sessionId, runId, reason: 'from the wire' });
    interrupt('to-old-run', 's', 'an-ended-run');
    interrupt('to-other-session', 'other', null);
    interrupt('to-current', 's', 'current');
    // One sender's messages are handled in order: once the third is acknowledged, the first two were handled.
    await waitFor(() => tab.received.length > 0);
    expect(tab.received).toStrictEqual([{ v: 1, type: 'ack', id: 'to-current' }]);
    expect(run.aborted()).toBe(true);
    const error = await run.outcome;
    expect(isTabulaError(error, 'run/interrupted')).toBe(true);
    expect((error as Error).message).toMatch(/interrupted: from the wire;/);

    // Unnamed (the sender could not tell which run holds the session): whichever run is in flight stops.
    const next = runUntilInterrupted(session, 'next');
    await next.started;
    interrupt('unnamed', 's', null);
    await waitFor(() => tab.received.length === 2);
    expect(tab.received[1]).toStrictEqual({ v: 1, type: 'ack', id: 'unnamed' });
    expect(isTabulaError(await next.outcome, 'run/interrupted')).toBe(true);
    await tabula.close();
  });

  it('that is malformed is reported as schema/invalid and stops nothing', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    const tab = otherTab(tabula.dbName);
    const run = runUntilInterrupted(session, 'r');
    await run.started;
    tab.channel.postMessage({ v: 1, type: 'interrupt', id: 'x', userId: 'anonymous', sessionId: 's', runId: null });
    await waitFor(() => tabula.reported.length === 1);
    const [error] = tabula.reported;
    expect(isTabulaError(error, 'schema/invalid')).toBe(true);
    expect(error!.message).toMatch(/^Ignored a malformed run message from another tab: /);
    expect((error as Error & { issues?: { path: PropertyKey[] }[] }).issues?.map((issue) => issue.path)).toEqual([['reason']]);
    expect(run.aborted()).toBe(false);
    expect(await session.interrupt('now')).toBe(true);
    expect(isTabulaError(await run.outcome, 'run/interrupted')).toBe(true);
    await tabula.close();
  });
});

describe('interrupt() of a run another tab holds', () => {
  it('sends the run it saw in flight and the reason, and resolves with the acknowledgement; an unknown ack is ignored', async () => {
    const tabA = await freshTabula({ userId: 'alice' });
    const tabB = await freshTabula({ userId: 'alice', name: tabA.dbName });
    const a = await tabA.session('s');
    const b = await tabB.session('s');
    const run = runUntilInterrupted(a, 'held-by-a');
    await run.started;
    const tab = otherTab(tabA.dbName);
    const answer = b.interrupt('please stop');
    await waitFor(() => tab.received.some((message) => message.type === 'interrupt'));
    const sent = tab.received.find((message) => message.type === 'interrupt')!;
    expect(sent).toStrictEqual({ v: 1, type: 'interrupt', id: expect.stringMatching(/^[0-9a-f]{32}$/) as unknown, userId: 'alice', sessionId: 's', runId: 'held-by-a', reason: 'please stop' });
    expect(await answer).toBe(true);
    // Tab A acknowledged on the wire too, with the id B sent.
    await waitFor(() => tab.received.some((message) => message.type === 'ack'));
    expect(tab.received.find((message) => message.type === 'ack')).toStrictEqual({ v: 1, type: 'ack', id: sent.id });
    expect(isTabulaError(await run.outcome, 'run/interrupted')).toBe(true);
    tab.channel.postMessage({ v: 1, type: 'ack', id: 'nobody-waits-for-this' });
    expect(await b.interrupt()).toBe(false);
    await Promise.all([tabA.close(), tabB.close()]);
  });

  it('resolves false when the tab that holds the run does not answer', async () => {
    const tabB = await freshTabula();
    const b = await tabB.session('s');
    // Tab A holds the run but listens to nothing (as a tab frozen by the browser would): nobody answers B.
    const tabA = await frozenTab(tabB.dbName, 's');
    const tab = otherTab(tabB.dbName);
    expect(await b.interrupt('anyone?')).toBe(false);
    // B did ask: the answer is false because nobody answered, not because B saw the session idle.
    expect(tab.received.map((message) => message.type)).toEqual(['interrupt']);
    tabA.release();
    await tabB.close();
  });

  it('still waiting for an answer when its tab closes: resolved false by close(), not left to its timeout', async () => {
    const tabB = await freshTabula();
    const b = await tabB.session('s');
    const tabA = await frozenTab(tabB.dbName, 's');
    const tab = otherTab(tabB.dbName);
    let settled: boolean | 'pending' = 'pending';
    const answer = b.interrupt('anyone?').then((value) => (settled = value));
    await waitFor(() => tab.received.some((message) => message.type === 'interrupt'));
    await tabB.close();
    // close() settled it before it resolved: one microtask later the answer is in.
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(await answer).toBe(false);
    tabA.release();
  });
});
