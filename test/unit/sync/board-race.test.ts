/**
 * A board edit made while a pulled board update is being stored (issue 26,
 * item 1). The leader applies the update, waits until the board has stored
 * it, and records what the server has of the board; it took that record from
 * the board's state after the wait, so an edit made meanwhile (an observe()
 * listener answering a remote change: how an agent uses the board) was
 * recorded as sent and never pushed, nor any later edit building on it, and
 * status said `pending 0`. Each case edits at another moment: inside the
 * listener (Yjs calls it inside the transaction that applied the update), a
 * microtask after it, a task after it.
 */
import { describe, expect, it } from 'vitest';
import type { BlackboardChange } from '../../../src/index.js';
import { uniqueUser } from '../../server/helpers.js';
import { pausedDevice, startServer, viaServer } from './helpers.js';

type Moment = 'in the listener' | 'a microtask later' | 'a task later';

/** Runs `edit` at `moment`, counted from the listener's call; resolves once it ran. */
function editAt(moment: Moment, edit: () => void): Promise<void> {
  if (moment === 'in the listener') {
    edit();
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const run = () => {
      edit();
      resolve();
    };
    if (moment === 'a microtask later') queueMicrotask(run);
    else setTimeout(run, 0);
  });
}

describe('httpSync: a board edit made while a pulled board update is stored', () => {
  it.each<Moment>(['in the listener', 'a microtask later', 'a task later'])('is pushed, and so is every later edit (the edit made %s)', { timeout: 60_000 }, async (moment) => {
    const server = startServer();
    const alice = uniqueUser('alice');
    const asker = await pausedDevice(alice, viaServer(server), 'asker');
    const agent = await pausedDevice(alice, viaServer(server), 'agent');
    const asked = (await asker.session('task')).blackboard;
    await asked.whenLoaded;
    asked.set('setup', true);
    await asked.flushed();
    await asker.sync?.flush();
    await agent.sync?.flush();

    // The agent answers a question the moment it arrives from the other device.
    const board = (await agent.session('task')).blackboard;
    await board.whenLoaded;
    const answers: Promise<void>[] = [];
    board.observe((changes: BlackboardChange[]) => {
      if (answers.length === 0 && changes.some((change) => change.key === 'question' && change.origin === 'remote')) answers.push(editAt(moment, () => board.set('answer', 42)));
    });
    asked.set('question', 'six times seven?');
    await asked.flushed();
    await asker.sync?.flush();
    await agent.sync?.flush();
    expect(answers).toHaveLength(1);
    await Promise.all(answers);
    await board.flushed();
    // A later edit builds on the answer: it is pushed too, and applies on the other device.
    board.set('later', 'after the answer');
    await board.flushed();
    await agent.sync?.flush();
    expect(agent.sync?.status()).toMatchObject({ state: 'idle', pending: 0 });
    await asker.sync?.flush();
    expect(asked.toJSON()).toEqual({ setup: true, question: 'six times seven?', answer: 42, later: 'after the answer' });
    await asker.close();
    await agent.close();
  });
});
