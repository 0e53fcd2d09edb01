/**
 * The counting engine: gpt-tokenizer behind a small API that runs the same
 * in a Web Worker, a SharedWorker or the page's own thread. Only the
 * encoding asked for is loaded (a dynamic import per encoding).
 *
 * Special-token strings in user text (`<|endoftext|>`) are counted as the
 * text they are, never treated as control tokens: gpt-tokenizer throws on
 * them by default.
 */
import { splitForCounting } from './split.js';

/** The encodings Tabula counts with. */
export type Encoding = 'o200k_base' | 'cl100k_base';
export const ENCODINGS: readonly Encoding[] = ['o200k_base', 'cl100k_base'];

type CountTokens = (text: string, options: { disallowedSpecial: Set<string> }) => number;

async function loadCountTokens(encoding: Encoding): Promise<CountTokens> {
  switch (encoding) {
    case 'o200k_base':
      return (await import('gpt-tokenizer/encoding/o200k_base')).countTokens as CountTokens;
    case 'cl100k_base':
      return (await import('gpt-tokenizer/encoding/cl100k_base')).countTokens as CountTokens;
  }
}

/** What a worker exposes (through Comlink) and what in-thread mode calls directly. */
export interface CountingEngine {
  /** Loads an encoding; resolves when it is ready to count. */
  load(encoding: Encoding): Promise<void>;
  /** Tokens of each text, in one call. */
  countTexts(encoding: Encoding, texts: string[]): Promise<number[]>;
  /**
   * Tokens of one large text, chunk by chunk, yielding between chunks so a
   * cancel() can get through; reports progress in characters.
   */
  countLarge(encoding: Encoding, requestId: string, text: string, onProgress?: (doneChars: number, totalChars: number) => void): Promise<number>;
  /** Stops a countLarge() in flight; it rejects with an Error named 'AbortError'. */
  cancel(requestId: string): void;
}

/**
 * Lets queued messages (a cancel) run between chunks. A MessageChannel
 * round trip, not setTimeout(0): nested timeouts are clamped to 4 ms, which
 * cost a 5 MB count 80 chunks × 4 ms.
 */
const yieldToEvents = () =>
  new Promise<void>((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });

export function createEngine(): CountingEngine {
  const loaded = new Map<Encoding, Promise<CountTokens>>();
  const cancelled = new Set<string>();
  const none = new Set<string>();

  const counter = (encoding: Encoding) => {
    let ready = loaded.get(encoding);
    if (!ready) loaded.set(encoding, (ready = loadCountTokens(encoding)));
    return ready;
  };
  const countChunks = (count: CountTokens, text: string) => {
    let total = 0;
    for (const chunk of splitForCounting(text)) total += count(chunk, { disallowedSpecial: none });
    return total;
  };

  return {
    async load(encoding) {
      await counter(encoding);
    },
    async countTexts(encoding, texts) {
      const count = await counter(encoding);
      return texts.map((text) => countChunks(count, text));
    },
    async countLarge(encoding, requestId, text, onProgress) {
      const count = await counter(encoding);
      const chunks = splitForCounting(text);
      let total = 0;
      let done = 0;
      try {
        for (const chunk of chunks) {
          if (cancelled.has(requestId)) {
            const error = new Error(`Counting request ${requestId} was cancelled.`);
            error.name = 'AbortError';
            throw error;
          }
          total += count(chunk, { disallowedSpecial: none });
          done += chunk.length;
          onProgress?.(done, text.length);
          if (chunks.length > 1) await yieldToEvents();
        }
        return total;
      } finally {
        cancelled.delete(requestId);
      }
    },
    cancel(requestId) {
      cancelled.add(requestId);
    },
  };
}
