/**
 * What a replica says of a board life when it deletes the session (`boardSeen`, a bounded Yjs state
 * vector) and what another replica's board holds beyond it (`unseenKeys`): the blackboard half of the
 * work a delete drops (issue 26). A board never opened and with nothing stored answers without Yjs.
 */
import { toBase64 } from 'lib0/buffer';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { BOARD_SEEN_MAX } from '../../../src/core/ops.js';
import { createLazyBoardRegistry } from '../../../src/blackboard/lazy.js';
import { EMPTY_BOARD_SEEN, blackboardDatabaseName } from '../../../src/blackboard/lives.js';
import { createBoardRegistry } from '../../../src/blackboard/registry.js';
import { boardSeenOf, unseenBoardKeys } from '../../../src/blackboard/seen.js';
import { BLACKBOARD_MAP } from '../../../src/blackboard/validate.js';
import { uniqueName } from '../store/helpers.js';

const registryOptions = (name: string, lifeOf = () => Promise.resolve<string | undefined>('life-1')) => ({
  name,
  peerId: `peer-${Math.random()}`,
  lifeOf,
  onError: (error: Error) => {
    throw error;
  },
});

describe('boardSeen and unseenKeys', () => {
  it('answer for a board never opened and never stored without loading Yjs, and create no database', async () => {
    const name = uniqueName('seen');
    let loads = 0;
    const registry = createLazyBoardRegistry({
      ...registryOptions(name),
      load: () => {
        loads += 1;
        return import('../../../src/blackboard/registry.js');
      },
    });
    expect(await registry.boardSeen('u', 's', 'life-1')).toBe(EMPTY_BOARD_SEEN);
    expect(await registry.unseenKeys('u', 's', 'life-1', EMPTY_BOARD_SEEN)).toEqual([]);
    expect(loads).toBe(0);
    const databases = (await indexedDB.databases()).map((info) => info.name);
    expect(databases).not.toContain(blackboardDatabaseName(name, 'u', 's', 'life-1'));
    await registry.close();
  });

  it('read a stored board of a life that is not open: its state vector, and the keys beyond another one', async () => {
    const name = uniqueName('seen');
    const writer = createBoardRegistry(registryOptions(name));
    const lease = writer.acquire('u', 's', 'life-1');
    await lease.blackboard.whenLoaded;
    lease.blackboard.set('seen', 1);
    await lease.blackboard.flushed();
    const before = await writer.boardSeen('u', 's', 'life-1');
    lease.blackboard.update({ later: 2, seen: 3 });
    lease.blackboard.set('gone', 4);
    lease.blackboard.delete('gone');
    await lease.blackboard.flushed();
    await lease.release();
    await writer.close();
    // Another tab, with nothing open, Yjs loaded only because the database stores something.
    let loads = 0;
    const reader = createLazyBoardRegistry({
      ...registryOptions(name),
      load: () => {
        loads += 1;
        return import('../../../src/blackboard/registry.js');
      },
    });
    expect(await reader.unseenKeys('u', 's', 'life-1', before)).toEqual(['later', 'seen']);
    expect(await reader.unseenKeys('u', 's', 'life-1', await reader.boardSeen('u', 's', 'life-1'))).toEqual([]);
    expect(await reader.unseenKeys('u', 's', 'life-1', EMPTY_BOARD_SEEN)).toEqual(['later', 'seen']);
    expect(loads).toBe(1);
    await reader.close();
  });

  it('keep the clients that wrote most when the state vector is over the limit: more is named, never less', () => {
    const doc = new Y.Doc();
    const map = doc.getMap(BLACKBOARD_MAP);
    // Many clients (ids as large as Yjs picks them), each writing its own key: one wrote far more than the others.
    const busy = 2 ** 30 + 7;
    for (let client = 2 ** 30 + 1; client <= 2 ** 30 + 1_000; client++) {
      const writer = new Y.Doc();
      writer.clientID = client;
      const times = client === busy ? 50 : 1;
      for (let i = 0; i < times; i++) writer.getMap(BLACKBOARD_MAP).set(`key ${client}`, i);
      Y.applyUpdate(doc, Y.encodeStateAsUpdate(writer));
    }
    expect(toBase64(Y.encodeStateVector(doc)).length).toBeGreaterThan(BOARD_SEEN_MAX);
    const seen = boardSeenOf(doc);
    expect(seen.length).toBeLessThanOrEqual(BOARD_SEEN_MAX);
    const kept = Y.decodeStateVector(Uint8Array.from(atob(seen), (c) => c.charCodeAt(0)));
    expect(kept.get(busy)).toBe(50);
    const named = unseenBoardKeys(doc, seen);
    // The keys of the clients left out are named, those of the clients kept are not.
    expect(named).not.toContain(`key ${busy}`);
    expect(named.length).toBe(1_000 - kept.size);
    expect(map.size).toBe(1_000);
  });

  it('name every key for a state vector that does not decode', () => {
    const doc = new Y.Doc();
    doc.getMap(BLACKBOARD_MAP).set('k', 1);
    expect(unseenBoardKeys(doc, '////')).toEqual(['k']);
  });
});
