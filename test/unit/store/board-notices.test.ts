/**
 * Blackboard change notices between the tabs of a profile
 * (src/store/board-notices.ts); two notice objects on one database name act
 * as two tabs (Node's BroadcastChannel). The class of bug this guards: a
 * notice that reaches only the tab that made it, or the other tabs but not
 * this one (the sync leader may run in either); a notice on another
 * database's channel; a malformed message from another tab thrown into this
 * one instead of reported; a listener that keeps hearing after it
 * unsubscribed or after close().
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TabulaError } from '../../../src/index.js';
import { createBoardNotices, type BoardNotices } from '../../../src/store/board-notices.js';
import { uniqueName, waitFor } from './helpers.js';

const opened: (BoardNotices | BroadcastChannel)[] = [];
afterEach(() => {
  for (const closable of opened.splice(0)) closable.close();
});

/** A notices object for database `name` that records what it hears and the errors it reports. */
function tab(name: string) {
  const errors: TabulaError[] = [];
  const notices = createBoardNotices(name, (error) => errors.push(error));
  const heard: string[] = [];
  const stop = notices.subscribe((userId, sessionId) => heard.push(`${userId}/${sessionId}`));
  opened.push(notices);
  return { notices, heard, errors, stop };
}

describe('board notices', () => {
  it('an announce reaches this tab at once and every other tab of the same database, and no other database', async () => {
    const name = uniqueName('notices');
    const here = tab(name);
    const there = tab(name);
    const elsewhere = tab(uniqueName('notices-other'));
    here.notices.announce('u', 's1');
    // Delivered here before announce() returns: the leader may run in this very tab.
    expect(here.heard).toEqual(['u/s1']);
    await waitFor(() => there.heard.length === 1);
    expect(there.heard).toEqual(['u/s1']);
    // Had the other database's tab shared the channel, the first notice it hears would be u/s1.
    elsewhere.notices.announce('v', 'mine');
    await waitFor(() => elsewhere.heard.length === 1);
    expect(elsewhere.heard).toEqual(['v/mine']);
    expect(here.heard).toEqual(['u/s1']);
    expect([here.errors, there.errors, elsewhere.errors]).toEqual([[], [], []]);
  });

  it('a malformed message from another tab is reported as schema/invalid and delivers nothing', async () => {
    const name = uniqueName('notices');
    const here = tab(name);
    const foreign = new BroadcastChannel(`tabula:${name}:board-changes`);
    opened.push(foreign);
    const bad: unknown[] = [null, 'u/s', { v: 2, userId: 'u', sessionId: 's' }, { v: 1, userId: 1, sessionId: 's' }, { v: 1, userId: 'u', sessionId: null }, { v: 1, userId: 'u' }];
    for (const message of bad) foreign.postMessage(message);
    foreign.postMessage({ v: 1, userId: 'u', sessionId: 'good' });
    await waitFor(() => here.heard.length === 1);
    expect(here.heard).toEqual(['u/good']);
    // Messages on one channel arrive in order: every bad one came before the good one.
    expect(here.errors).toHaveLength(bad.length);
    for (const error of here.errors) {
      expect(error.code).toBe('schema/invalid');
      expect(error.message).toBe('Ignored a malformed blackboard notice from another tab (expected { v: 1, userId, sessionId }).');
    }
  });

  it('stops delivering to a listener that unsubscribed, and to every listener after close()', async () => {
    const name = uniqueName('notices');
    const here = tab(name);
    const there = tab(name);
    const second: string[] = [];
    there.notices.subscribe((userId, sessionId) => second.push(`${userId}/${sessionId}`));
    here.stop();
    here.notices.announce('u', 'a');
    expect(here.heard).toEqual([]);
    await waitFor(() => second.length === 1);
    expect(there.heard).toEqual(['u/a']);
    there.notices.close();
    here.notices.announce('u', 'b');
    // A third tab, subscribed after the close, hears the next notice; had `there` still been listening,
    // it would have heard 'u/b' before that.
    const third = tab(name);
    here.notices.announce('u', 'c');
    await waitFor(() => third.heard.length === 1);
    expect(third.heard).toEqual(['u/c']);
    expect(there.heard).toEqual(['u/a']);
    expect(second).toEqual(['u/a']);
  });

  it('without BroadcastChannel (an old runtime), notices still reach this tab, and stop at close()', () => {
    vi.stubGlobal('BroadcastChannel', undefined);
    try {
      const here = tab(uniqueName('notices'));
      here.notices.announce('u', 'a');
      expect(here.heard).toEqual(['u/a']);
      here.notices.close();
      here.notices.announce('u', 'b');
      expect(here.heard).toEqual(['u/a']);
      expect(here.errors).toEqual([]);
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
