/**
 * Every BroadcastChannel and Web Lock name the store and its sync state use
 * (src/store/db/keys.ts `storeNames`, src/store/replication/keys.ts
 * `syncNames`), pinned byte for byte for one sample database. Tabs of an
 * older version talk to newer ones over these channels and contend for
 * these locks, so a name that drifts (a reordered part, a different
 * encoding of the session) splits one profile's tabs in two without any
 * error. The class of bug this guards: a name rewritten in the module that
 * uses it, or in the one that owns it, that no longer matches what earlier
 * versions used; and a module that builds its own name instead of the
 * owner's (the wire checks at the end listen on the literal names).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { storeNames } from '../../../../src/store/db/keys.js';
import { platformLocks } from '../../../../src/store/locks.js';
import { syncNames } from '../../../../src/store/replication/keys.js';
import { freshTabula, uniqueName, waitFor } from '../helpers.js';

/** A database name, user and session with the characters an encoding could treat differently (`:`, `"`, space). */
const DB = 'app:db';
const USER = 'user "1"';
const SESSION = 's:1 x';

describe('the store names its channels and locks as earlier versions did', () => {
  it('pins every store channel and lock name for a sample database', () => {
    expect(storeNames.changes(DB)).toBe('tabula:app:db:changes');
    expect(storeNames.runs(DB)).toBe('tabula:app:db:runs');
    expect(storeNames.runLock(DB, USER, SESSION)).toBe('tabula:app:db:run:["user \\"1\\"","s:1 x"]');
    expect(storeNames.streamLock(DB, USER, SESSION, 'm:1')).toBe('tabula:app:db:stream:["user \\"1\\"","s:1 x"]:m:1');
    expect(storeNames.boardChanges(DB)).toBe('tabula:app:db:board-changes');
  });

  it("pins sync's leader lock and channel names for a sample database", () => {
    expect(syncNames.leaderLock(DB, USER)).toBe('tabula:app:db:sync-leader:["user \\"1\\""]');
    expect(syncNames.channel(DB, USER)).toBe('tabula:app:db:sync:["user \\"1\\""]');
  });
});

describe('the store uses those names on the wire', () => {
  const opened: BroadcastChannel[] = [];
  afterEach(() => {
    for (const channel of opened.splice(0)) channel.close();
  });
  /** A raw channel on a literal name, as a tab of another version would open it; records what it hears. */
  function listen(channelName: string): unknown[] {
    const channel = new BroadcastChannel(channelName);
    opened.push(channel);
    const heard: unknown[] = [];
    channel.onmessage = (event: MessageEvent<unknown>) => heard.push(event.data);
    return heard;
  }

  it('announces a change on tabula:<name>:changes and a stored board change on tabula:<name>:board-changes', async () => {
    const name = uniqueName('names');
    const changes = listen(`tabula:${name}:changes`);
    const boards = listen(`tabula:${name}:board-changes`);
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    await session.append({ role: 'user', content: 'hi' });
    await waitFor(() => changes.length > 0);
    expect(changes[0]).toMatchObject({ v: 1, userId: 'anonymous', sessionId: 's' });
    await session.blackboard.whenLoaded;
    session.blackboard.set('k', 1);
    await session.blackboard.flushed();
    await waitFor(() => boards.length > 0);
    expect(boards[0]).toEqual({ v: 1, userId: 'anonymous', sessionId: 's' });
    await tabula.close();
  });

  it('holds tabula:<name>:run:["user","session"] while a run is in flight', async () => {
    const name = uniqueName('names');
    const tabula = await freshTabula({ name });
    const session = await tabula.session('s');
    let held: string[] = [];
    await session.run(async () => {
      held = await platformLocks().held();
    });
    expect(held).toContain(`tabula:${name}:run:["anonymous","s"]`);
    await tabula.close();
  });
});
