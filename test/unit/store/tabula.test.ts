/**
 * openTabula() itself: when the database cannot be opened, it rejects with
 * an error naming the database, and closes what it set up while the open was
 * under way (the change feed's BroadcastChannel), so nothing is left open.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openTabula } from '../../../src/index.js';
import { TabulaError } from '../../../src/core/errors.js';
import { uniqueName } from './helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe('openTabula', () => {
  it('a failed open rejects naming the database, and leaves no channel open', async () => {
    const opened = new Set<BroadcastChannel>();
    const Native = globalThis.BroadcastChannel;
    vi.stubGlobal(
      'BroadcastChannel',
      class extends Native {
        constructor(name: string) {
          super(name);
          opened.add(this);
        }
        override close() {
          opened.delete(this);
          super.close();
        }
      },
    );
    // The browser refuses the open, as it does where the user blocks site storage.
    vi.spyOn(indexedDB, 'open').mockImplementation(() => {
      throw new DOMException('The user denied permission to access the database.', 'SecurityError');
    });
    const name = uniqueName('refused');
    const error = await openTabula({ name }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TabulaError);
    expect((error as TabulaError).code).toBe('storage/failed');
    expect((error as TabulaError).message).toContain(`open the IndexedDB database "${name}"`);
    expect(opened.size).toBe(0);

    // The same name opens once the browser lets it.
    vi.restoreAllMocks();
    const tabula = await openTabula({ name });
    expect(opened.size).toBeGreaterThan(0);
    await tabula.close();
    expect(opened.size).toBe(0);
  });
});
