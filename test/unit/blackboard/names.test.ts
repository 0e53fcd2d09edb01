/**
 * Every name the blackboard keeps things under (src/blackboard/lives.ts):
 * a board's database, the channel that announces ended lives, and each
 * board's tab channel, pinned byte for byte for one sample database. Tabs
 * of an older version talk to newer ones over these channels and open the
 * same databases, so a name that drifts splits one profile's tabs (or
 * loses a board's stored content) without any error. The wire checks at
 * the end listen on the literal names, so a module that builds its own
 * name instead of the owner's fails here too.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { blackboardDatabaseName, boardChannelName, livesChannelName } from '../../../src/blackboard/lives.js';
import { createBoardRegistry } from '../../../src/blackboard/registry.js';
import { uniqueName, waitFor } from '../store/helpers.js';

const DB = 'app:db';
const USER = 'user "1"';
const SESSION = 's:1 x';

describe('the blackboard names its databases and channels as earlier versions did', () => {
  it('pins every blackboard name for a sample database', () => {
    expect(blackboardDatabaseName(DB, USER, SESSION)).toBe('app%3Adb:user%20%221%22:s%3A1%20x:blackboard');
    expect(blackboardDatabaseName(DB, USER, SESSION, '0001:a')).toBe('app%3Adb:user%20%221%22:s%3A1%20x:0001%3Aa:blackboard');
    expect(livesChannelName(DB)).toBe('tabula:app:db:blackboard-lives');
    expect(boardChannelName(DB, USER, SESSION, '')).toBe('tabula:app:db:blackboard:["user \\"1\\"","s:1 x",""]');
    expect(boardChannelName(DB, USER, SESSION, '0001:a')).toBe('tabula:app:db:blackboard:["user \\"1\\"","s:1 x","0001:a"]');
  });
});

describe('the blackboard uses those names on the wire', () => {
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

  it("sends a board's frames on its life's tab channel and an ended life on tabula:<name>:blackboard-lives", async () => {
    const name = uniqueName('names');
    const errors: unknown[] = [];
    // A life other than the first, as a session deleted and created again has: the life is part of the name.
    const boards = createBoardRegistry({ name, peerId: uniqueName('peer'), onError: (error) => errors.push(error), lifeOf: () => Promise.resolve('0001:a') });
    const frames = listen(`tabula:${name}:blackboard:["anonymous","s","0001:a"]`);
    const lives = listen(`tabula:${name}:blackboard-lives`);
    const lease = boards.acquire('anonymous', 's');
    await lease.blackboard.whenLoaded;
    lease.blackboard.set('k', 1);
    await waitFor(() => frames.length > 0);
    await boards.destroy('anonymous', 's', '0001:a');
    await waitFor(() => lives.length > 0);
    expect(lives[0]).toMatchObject({ v: 1, userId: 'anonymous', sessionId: 's', life: '0001:a' });
    await boards.close();
    expect(errors).toEqual([]);
  });
});
