/**
 * The store's half of one user's sync, assembled: a {@link Replica} over
 * the outbox (outbox.ts), the pulled pages (pages.ts), the boards
 * (board-access.ts, boards.ts), the first seed and the start-over
 * (seed.ts), and the user's sync state in meta (keys.ts). Every failure
 * leaves here as a TabulaError of its own condition (a full disk is
 * `storage/quota-exceeded`), mapped at this edge, so the engine never has
 * to guess what a storage error was.
 */
import { mapStorageError } from '../errors.js';
import type { BoardNotices } from '../board-notices.js';
import type { StoreContext } from '../context.js';
import { createBoardQueue, syncBoards } from './board-access.js';
import type { Replica } from './contract.js';
import { syncNames } from './keys.js';
import { createOutboxReader, randomId } from './outbox.js';
import { applyPage, cursorOf } from './pages.js';
import { reseedOutbox } from './seed.js';

/** What the store lends replication for one user (host.ts makes it, the engine holds it opaquely). */
export interface ReplicaSource {
  readonly store: StoreContext;
  readonly userId: string;
  /** The board changes stored in any tab of the profile. */
  readonly notices: BoardNotices;
}

/** Runs `work`, reporting a failure as the TabulaError of its condition (see the module comment). */
async function mapped<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw mapStorageError(error, what);
  }
}

/** The replica of `source.userId` (see {@link Replica}); `maxPushItems` is the most items one push takes. */
export function createReplica(source: ReplicaSource, maxPushItems: number): Replica {
  const { store, userId } = source;
  const { db } = store;
  const clientKey = syncNames.clientId(userId);
  const outbox = createOutboxReader(db, userId, maxPushItems);
  const boards = syncBoards(store, userId, source.notices);
  const boardQueue = createBoardQueue(store, userId, boards);

  const loadClientId = async (): Promise<string> => {
    const stored = await db.meta.get(clientKey);
    if (typeof stored?.value === 'string') return stored.value;
    const id = randomId();
    await db.meta.put({ key: clientKey, value: id });
    return id;
  };
  /** The client id the server numbers this user's pushes from this profile by; a new one after the server lost them. */
  let clientId = loadClientId();
  // A failed read is the caller's to report, when it asks.
  clientId.catch(() => undefined);

  return {
    clientId: () => mapped(`read the sync client id of user "${userId}"`, () => clientId),
    cursor: () => mapped(`read the sync cursor of user "${userId}"`, async () => cursorOf(await db.meta.get(syncNames.cursor(userId)))),
    epoch: () =>
      mapped(`read the sync server epoch of user "${userId}"`, async () => {
        const stored = await db.meta.get(syncNames.epoch(userId));
        return typeof stored?.value === 'string' ? stored.value : null;
      }),
    setEpoch: (epoch) => mapped(`store the sync server epoch of user "${userId}"`, async () => void (await db.meta.put({ key: syncNames.epoch(userId), value: epoch }))),
    waiting: () => mapped(`count the sync outbox of user "${userId}"`, () => outbox.waiting()),
    hand: (rows) => outbox.hand(rows),
    take: (limits) => mapped(`read the sync outbox of user "${userId}"`, () => outbox.take(limits)),
    acknowledge: (lastSeq) => mapped(`remove the items the sync server acknowledged from the outbox of user "${userId}"`, () => outbox.acknowledge(lastSeq)),
    park: (item, refusal) => mapped(`set aside the outbox item of seq ${item.seq} of user "${userId}"`, () => outbox.park(item, refusal)),
    dropParked: (id) => mapped(`drop the parked item "${id}" of user "${userId}"`, () => outbox.dropParked(id)),
    queueBoards: () => mapped(`queue the blackboards of user "${userId}" for sync`, () => boardQueue.queue()),
    applyPage: (page, from) => mapped(`apply a page pulled from the sync server for user "${userId}"`, () => applyPage({ store, userId, clientId: () => clientId, boards }, page, from)),
    reseed: (epoch) =>
      mapped(`start the sync state of user "${userId}" over`, async () => {
        const used = await clientId;
        const started = await reseedOutbox(db, userId, { clientId: randomId(), epoch }, used);
        const stored = await db.meta.get(clientKey);
        clientId = typeof stored?.value === 'string' ? Promise.resolve(stored.value) : loadClientId();
        outbox.forget();
        // The queued snapshots of the boards went: each board is queued whole again.
        boardQueue.rescan();
        return started;
      }),
    onBoardChange: (listener) => boardQueue.onChange(listener),
  };
}
