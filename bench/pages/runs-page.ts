/**
 * In-page half of the runs benchmark (bench/runs.bench.ts). Two tabs load
 * it on one database: one holds runs, the other interrupts them. The
 * baseline for the gate is a bare Web Lock request measured here too.
 */
import { expose } from './expose.js';
import { openTabula, type Session } from '../../src/index.js';

let session: Session | null = null;
let abortedAt = 0;

async function open(dbName: string): Promise<void> {
  const tabula = await openTabula({ name: dbName });
  session = await tabula.session('bench');
}

function current(): Session {
  if (!session) throw new Error('open() first');
  return session;
}

const now = () => performance.timeOrigin + performance.now();

const bench = {
  open,
  async gateSamples(runs: number): Promise<number[]> {
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      await current().run(async () => undefined);
      samples.push(performance.now() - start);
    }
    return samples;
  },
  async lockSamples(runs: number): Promise<number[]> {
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      await navigator.locks.request('bench:bare-lock', async () => undefined);
      samples.push(performance.now() - start);
    }
    return samples;
  },
  /** Starts a run that waits for its signal; resolves once it is running. */
  async holdRun(): Promise<void> {
    abortedAt = 0;
    await new Promise<void>((started) => {
      current()
        .run(async (ctx) => {
          started();
          await new Promise<void>((resolve) =>
            ctx.signal.addEventListener('abort', () => {
              abortedAt = now();
              resolve();
            }),
          );
        })
        .catch(() => undefined);
    });
  },
  abortedAt: () => abortedAt,
  /** Interrupts the session's run (held in the other tab); returns when it was sent and the ack round trip. */
  async interrupt(): Promise<{ sentAt: number; ackMs: number; delivered: boolean }> {
    const sentAt = now();
    const start = performance.now();
    const delivered = await current().interrupt('benchmark');
    return { sentAt, ackMs: performance.now() - start, delivered };
  },
};

expose(bench);
