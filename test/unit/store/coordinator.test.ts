/**
 * The run coordinator's channel (coordinator.ts) opens on the first run or
 * interrupt, not with openTabula(): a page that only reads never opens it,
 * and interrupts between instances still arrive (runs.test.ts has the rest).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freshTabula, uniqueName } from './helpers.js';

/** Records the name of every BroadcastChannel opened while it is installed. */
function recordChannels(): string[] {
  const opened: string[] = [];
  const Real = globalThis.BroadcastChannel;
  vi.stubGlobal(
    'BroadcastChannel',
    class extends Real {
      constructor(name: string) {
        super(name);
        opened.push(name);
      }
    },
  );
  return opened;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('run coordinator channel', () => {
  it('is not opened by openTabula, session() or reads; the first run opens it once, and an interrupt from another instance arrives', async () => {
    const opened = recordChannels();
    const name = uniqueName();
    const runs = `tabula:${name}:runs`;
    const reader = await freshTabula({ name });
    const session = await reader.session('s');
    await session.append({ role: 'user', content: 'hi' });
    expect((await session.messages({ last: 50 })).map((m) => m.content)).toEqual(['hi']);
    expect(opened).not.toContain(runs);

    const other = await freshTabula({ name });
    let resolveStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (resolveStarted = resolve));
    const running = session.run(async (ctx) => {
      resolveStarted();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
    });
    const outcome = running.then(() => null, (error: unknown) => error);
    await started;
    expect(opened.filter((channel) => channel === runs)).toHaveLength(1);
    expect(await (await other.session('s')).interrupt('stop')).toBe(true);
    expect(await outcome).toMatchObject({ code: 'run/interrupted' });
    expect(opened.filter((channel) => channel === runs)).toHaveLength(2);
    await session.run(async () => undefined);
    expect(opened.filter((channel) => channel === runs)).toHaveLength(2);
    await reader.close();
    await other.close();
  });
});
