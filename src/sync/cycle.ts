/**
 * One push-and-pull, the engine's unit of work: push the outbox in seq
 * order (halving a refused push until the item the server refuses goes
 * alone, then parking it), pull page by page, and start the user's state
 * over when the server turns out to have lost it (a new epoch, a cursor
 * past its head, a push answered with fewer items than it acknowledged).
 * Cycles run one at a time in a tab; pages (a pull's or a poke's) apply one
 * at a time, each continuing the cursor. What the items mean is the
 * replica's; when a cycle runs is the loop's (client.ts).
 */
import { TabulaError } from '../core/errors.js';
import { safeParse } from '../core/validation.js';
import type { OutboxItem, PageOutcome, PulledPage, Replica, SyncHost } from '../store/replication/contract.js';
import type { ServerWatch } from './answers.js';
import { HttpFailure, RETRY_LATER, ServerReset, syncError, type Http } from './http.js';
import type { Leadership } from './leader.js';
import { DEFAULT_SYNC_LIMITS, ErrorResponseSchema, PullResponseSchema, PushResponseSchema, SYNC_PATHS, parseWire, type PushItem } from './protocol.js';

/** Stays under the server's default body limit with room for the envelope. */
const PUSH_BYTES = DEFAULT_SYNC_LIMITS.maxBodyBytes - 64 * 1024;
/** Statuses of a push the server refused for what it holds (invalid, another user's, too large): never taken on a retry. */
const REFUSED_STATUS: ReadonlySet<number> = new Set([400, 403, 413]);
/** Resets one cycle may run: a server whose epoch changes on every answer (two stores behind one URL) is reported, not chased. */
const MAX_RESETS_PER_CYCLE = 2;

/** What a cycle works with. */
export interface CycleOptions {
  readonly host: SyncHost;
  readonly replica: Replica;
  readonly http: Http;
  readonly watch: ServerWatch;
  readonly leadership: Leadership;
  readonly closed: () => boolean;
}

/** The cycles and page turns of one engine. */
export interface Cycles {
  /** One push-and-pull (push only, when `pulling` is false); serialized, so flush() and the leader never overlap in this tab. */
  run(pulling?: boolean): Promise<void>;
  /**
   * Applies a page in turn: a poke's page does not wait for a cycle's push or its pull's request, only for
   * the page being applied; every page checks the cursor it continues (Replica.applyPage). `skip`, asked
   * when its turn comes, drops it ('stale').
   */
  applyInTurn(page: PulledPage, from: { readonly after: string | null }, skip?: () => boolean): Promise<PageOutcome>;
  /** Cycles that failed in a row (0 after one that succeeded). */
  failures(): number;
  /** Resolves once the cycle and the page under way (if any) have ended. */
  settled(): Promise<void>;
}

/** The cycles of an engine (see the module comment). */
export function createCycles(options: CycleOptions): Cycles {
  const { host, replica, http, watch, leadership } = options;
  let failures = 0;
  let running: Promise<void> = Promise.resolve();
  /** The page being applied, or the reset: pages apply one at a time, each continuing the cursor. */
  let applying: Promise<unknown> = Promise.resolve();

  /** Work queued before close() (a cycle, a page) stops here instead of starting. */
  const assertRunning = (): void => {
    if (options.closed()) throw new TabulaError('storage/closed', `Tabula "${host.name}" is closed; sync stopped.`);
  };
  const observe = (headers: Headers, sentAt: number, receivedAt: number) => watch.observe(headers, sentAt, receivedAt);

  /** Runs `work` after the page being applied, and before the next one. */
  const inTurn = <T>(work: () => Promise<T>): Promise<T> => {
    const next = applying.then(work);
    applying = next.catch(() => undefined);
    return next;
  };

  /**
   * Has the user's sync state started over (see {@link ServerReset}): unless another tab has already,
   * everything held here is queued again under a new client id and the cursor goes; either way this
   * engine goes on with the stored state.
   */
  const reset = async (signal: ServerReset): Promise<void> => {
    // In turn with the pages being applied: a page's cursor is written after its boards, and one applied
    // across the reset would put back the cursor the reset takes away (a cursor into the old server's log).
    const started = await inTurn(() => replica.reseed(signal.epoch));
    await watch.restarted();
    if (started) {
      host.onError(
        new TabulaError(
          'sync/gap',
          `The sync server no longer holds what this device synced of user "${host.userId}" (${signal.why}): its data was reset or restored. Everything this device holds of the user is queued again and pulled from the start; nothing here is lost.`,
        ),
      );
    }
  };

  /** Sets an item the server refused alone aside, and says so (status, onError). */
  const park = async (item: OutboxItem, refusal: TabulaError): Promise<void> => {
    const parked = await replica.park(item, refusal);
    if (!parked) return;
    leadership.setStatus({ ...leadership.status(), parked: (await replica.waiting()).parked });
    const what = 'op' in item ? `${item.op.kind} op ${item.op.id}` : 'blackboard update';
    host.onError(
      new TabulaError(
        refusal.code,
        `The sync server refused the ${what} of session "${parked.sessionId}" (seq ${item.seq}): ${refusal.message} It is set aside (status().parked, id "${parked.id}") and the items after it sync; what it wrote stays on this device only. Drop it with tabula.sync.dropParked("${parked.id}").`,
      ),
    );
  };

  const push = async (): Promise<void> => {
    const id = await replica.clientId();
    await replica.queueBoards();
    /** Most items the next push takes: halved after a refusal, until the refused item goes alone and is parked. */
    let batch = DEFAULT_SYNC_LIMITS.maxPushItems;
    for (;;) {
      const items: PushItem[] = await replica.take({ maxItems: batch, maxBytes: PUSH_BYTES });
      if (items.length === 0) return;
      let lastSeq: number;
      try {
        lastSeq = parseWire(PushResponseSchema, await http.post(SYNC_PATHS.push, { clientId: id, items }, observe), 'The push response').lastSeq;
      } catch (error) {
        // An item the server refuses (400, 403, 413) would be refused on every retry and hold up every
        // item behind it: halve the push until it goes alone, then set it aside.
        if (error instanceof HttpFailure && REFUSED_STATUS.has(error.status)) {
          if (items.length > 1) {
            batch = Math.ceil(items.length / 2);
          } else {
            await park(items[0] as OutboxItem, syncError(error));
            batch = DEFAULT_SYNC_LIMITS.maxPushItems;
          }
          continue;
        }
        // A 409 says what the server has: drop what it acknowledged and go on from there.
        if (!(error instanceof HttpFailure) || error.status !== 409) throw error;
        const parsed = safeParse(ErrorResponseSchema, error.body);
        if (!parsed.success || parsed.data.error.lastSeq === undefined) throw error;
        lastSeq = parsed.data.error.lastSeq;
        // Less than it acknowledged (the outbox drops only what it did): the server lost this client's items.
        const first = (items[0] as PushItem).seq;
        if (lastSeq < first - 1) throw new ServerReset(null, `it holds this client's items up to seq ${lastSeq} only, and acknowledged up to ${first - 1}`);
      }
      // The server has committed everything up to lastSeq: those items leave the outbox.
      await replica.acknowledge(lastSeq);
      // A long outbox shows its progress; after a short one the cycle's end counts what is left.
      if (items.length === DEFAULT_SYNC_LIMITS.maxPushItems) leadership.setStatus({ state: 'syncing', pending: (await replica.waiting()).pending });
    }
  };

  const applyInTurn: Cycles['applyInTurn'] = (page, from, skip = () => false) =>
    inTurn(async () => {
      assertRunning();
      return skip() ? 'stale' : replica.applyPage(page, from);
    });

  const pull = async (): Promise<void> => {
    for (;;) {
      const cursor = await replica.cursor();
      let answer: unknown;
      try {
        answer = await http.post(SYNC_PATHS.pull, { cursor, limit: DEFAULT_SYNC_LIMITS.maxPullItems }, observe);
      } catch (error) {
        // The cursor is past everything the server holds: it lost what this device pulled.
        const parsed = error instanceof HttpFailure && error.status === 409 ? safeParse(ErrorResponseSchema, error.body) : null;
        if (parsed?.success && parsed.data.error.head !== undefined) throw new ServerReset(null, `its log of the user ends at ${parsed.data.error.head}, before this device's cursor ${cursor}`);
        throw error;
      }
      const page = parseWire(PullResponseSchema, answer, 'The pull response');
      // A poke may have brought some of these items while the request was out: then the page no longer
      // continues the cursor ('stale'), and the next request starts from where the cursor is now.
      const outcome = await applyInTurn(page, { after: cursor });
      if (outcome !== 'stale' && !page.more) return;
    }
  };

  return {
    run(pulling = true) {
      const next = running.then(async () => {
        assertRunning();
        // Pending as last counted (every local write recounts it): counting here would delay the push.
        leadership.setStatus({ state: 'syncing' });
        try {
          for (let resets = 0; ; resets++) {
            try {
              await push();
              // After a reset the cycle pulls whatever it was asked for: the server is read from the start.
              if (pulling || resets > 0) await pull();
              break;
            } catch (error) {
              if (!(error instanceof ServerReset) || resets === MAX_RESETS_PER_CYCLE) throw error;
              await reset(error);
            }
          }
          failures = 0;
          leadership.setStatus({ state: 'idle', ...(await replica.waiting()), lastSyncedAt: Date.now() });
        } catch (error) {
          failures += 1;
          const failure = syncError(error);
          // Refusals that mean "not now" (too many streams, a body too slow) are retried like an outage, not reported.
          const state = failure.code === 'sync/unauthorized' ? 'unauthorized' : failure.code === 'sync/offline' || RETRY_LATER.has(failure.code) ? 'offline' : 'error';
          if (state === 'unauthorized') http.forgetToken();
          if (!options.closed()) leadership.setStatus({ state, pending: await replica.waiting().then(({ pending }) => pending, () => leadership.status().pending), error: failure });
          // A cycle cut short by close() is no failure to report: the app closed it.
          if (state === 'error' && !options.closed()) host.onError(failure);
          throw failure;
        }
      });
      running = next.catch(() => undefined);
      return next;
    },
    applyInTurn,
    failures: () => failures,
    async settled() {
      await running;
      await applying;
    },
  };
}
