/**
 * Exact token counts in near-linear time, whatever the text.
 *
 * A tiktoken-style tokenizer first splits text into pre-tokens with a regex,
 * then byte-pair-encodes each pre-token on its own; the count is the sum
 * over pre-tokens. Two consequences used here:
 * - Text cut at a pre-token boundary counts the same in pieces as whole
 *   (the regex scans left to right, so the matches after a boundary depend
 *   only on the text after it), so large text is counted in windows that end
 *   on a boundary: exact, with progress and cancellation between windows.
 * - gpt-tokenizer merges a pre-token in O(n²) (each merge rescans and splices
 *   arrays): one unbroken run (70 KB of `a` is one pre-token) took 9 s. Long
 *   pre-tokens are merged here with a heap and a linked list instead:
 *   the same rule (lowest rank first, leftmost on ties), so the same tokens,
 *   in O(n log n).
 *
 * This reads gpt-tokenizer's encoder (its pre-token regex and rank lookups),
 * which its typings mark private; {@link exactCounterOf} checks the shape and
 * returns null when a gpt-tokenizer version lacks it, and the engine then
 * counts with gpt-tokenizer's own countTokens.
 */

/** The parts of gpt-tokenizer's BytePairEncodingCore this module uses. */
interface EncoderCore {
  tokenSplitRegex: RegExp;
  getBpeRankFromString(text: string): number | undefined;
  getBpeRankFromBytes(bytes: Uint8Array): number | undefined;
  bytePairEncode(text: string): number[];
}

/** Pre-tokens at least this long are merged with the heap; shorter ones by gpt-tokenizer (with its merge cache). */
export const LONG_PRETOKEN_CHARS = 256;

/** Counts one encoding's tokens exactly. */
export interface ExactCounter {
  /** Tokens of `text` from `start` to the first pre-token boundary at or after `start + minChars` (or the end); returns the count and where it stopped. */
  countWindow(text: string, start: number, minChars: number): { tokens: number; end: number };
  /** Tokens of the whole of `text`. */
  count(text: string): number;
}

function isEncoderCore(value: unknown): value is EncoderCore {
  if (typeof value !== 'object' || value === null) return false;
  const core = value as Record<string, unknown>;
  return (
    core.tokenSplitRegex instanceof RegExp &&
    core.tokenSplitRegex.global &&
    typeof core.getBpeRankFromString === 'function' &&
    typeof core.getBpeRankFromBytes === 'function' &&
    typeof core.bytePairEncode === 'function'
  );
}

/**
 * Tokens of one pre-token of `n` UTF-8 bytes: tiktoken's merge loop, with a
 * binary heap of candidate pairs ordered by (rank, position) and lazy
 * deletion, instead of a linear scan per merge. `rankOf(start, end)` is the
 * rank of bytes [start, end) as one token, or undefined.
 */
export function mergeCount(n: number, rankOf: (start: number, end: number) => number | undefined): number {
  if (n <= 1) return n;
  // Parts are byte ranges [i, next[i]); a removed part has next[i] = -1.
  const next = new Int32Array(n + 1);
  const prev = new Int32Array(n + 1);
  for (let i = 0; i <= n; i++) {
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  /** The rank of merging part i with its successor; Infinity when there is none or the pair is not a token. */
  const pairRank = new Float64Array(n);
  const rankAt = (i: number): number => {
    const j = next[i] as number;
    if (j >= n) return Infinity;
    return rankOf(i, next[j] as number) ?? Infinity;
  };
  // A binary min-heap of (rank, position), in two parallel arrays.
  let heapRanks = new Float64Array(n);
  let heapPos = new Int32Array(n);
  let size = 0;
  const less = (a: number, b: number) => (heapRanks[a] as number) < (heapRanks[b] as number) || ((heapRanks[a] as number) === (heapRanks[b] as number) && (heapPos[a] as number) < (heapPos[b] as number));
  const swap = (a: number, b: number) => {
    const r = heapRanks[a] as number;
    heapRanks[a] = heapRanks[b] as number;
    heapRanks[b] = r;
    const p = heapPos[a] as number;
    heapPos[a] = heapPos[b] as number;
    heapPos[b] = p;
  };
  const push = (rank: number, pos: number) => {
    if (rank === Infinity) return;
    if (size === heapRanks.length) {
      const ranks = new Float64Array(size * 2);
      ranks.set(heapRanks);
      heapRanks = ranks;
      const positions = new Int32Array(size * 2);
      positions.set(heapPos);
      heapPos = positions;
    }
    heapRanks[size] = rank;
    heapPos[size] = pos;
    let i = size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(i, parent)) break;
      swap(i, parent);
      i = parent;
    }
  };
  const pop = () => {
    size--;
    swap(0, size);
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < size && less(left, smallest)) smallest = left;
      if (right < size && less(right, smallest)) smallest = right;
      if (smallest === i) break;
      swap(i, smallest);
      i = smallest;
    }
  };

  for (let i = 0; i < n - 1; i++) {
    const rank = rankAt(i);
    pairRank[i] = rank;
    push(rank, i);
  }
  pairRank[n - 1] = Infinity;
  let parts = n;
  while (size > 0) {
    const rank = heapRanks[0] as number;
    const i = heapPos[0] as number;
    pop();
    // Stale entry: the part was merged away or its pair changed since this was pushed.
    if (next[i] === -1 || pairRank[i] !== rank) continue;
    const j = next[i] as number;
    const after = next[j] as number;
    next[i] = after;
    if (after <= n) prev[after] = i;
    next[j] = -1;
    parts--;
    pairRank[i] = rankAt(i);
    push(pairRank[i], i);
    const before = prev[i] as number;
    if (before >= 0) {
      pairRank[before] = rankAt(before);
      push(pairRank[before], before);
    }
  }
  return parts;
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/**
 * An exact counter over gpt-tokenizer's encoder for `api` (the default
 * export of `gpt-tokenizer/encoding/<name>`), or null when this version of
 * gpt-tokenizer does not have the parts it needs.
 */
export function exactCounterOf(api: unknown): ExactCounter | null {
  const core = typeof api === 'object' && api !== null ? (api as { bytePairEncodingCoreProcessor?: unknown }).bytePairEncodingCoreProcessor : undefined;
  if (!isEncoderCore(core)) return null;
  // A private copy: lastIndex is state, and gpt-tokenizer's own calls must not see ours.
  const regex = new RegExp(core.tokenSplitRegex.source, core.tokenSplitRegex.flags);
  const utf8 = new TextEncoder();

  const piece = (pretoken: string): number => {
    if (core.getBpeRankFromString(pretoken) !== undefined) return 1;
    if (pretoken.length < LONG_PRETOKEN_CHARS) return core.bytePairEncode(pretoken).length;
    // In ASCII text byte offsets are character offsets: ranks are looked up by string slices, with no decoding.
    if (isAscii(pretoken)) return mergeCount(pretoken.length, (start, end) => core.getBpeRankFromString(pretoken.slice(start, end)));
    const bytes = utf8.encode(pretoken);
    return mergeCount(bytes.length, (start, end) => core.getBpeRankFromBytes(bytes.subarray(start, end)));
  };

  const countWindow = (text: string, start: number, minChars: number) => {
    let tokens = 0;
    regex.lastIndex = start;
    const stopAfter = start + minChars;
    let end: number;
    for (;;) {
      const match = regex.exec(text);
      if (match === null) {
        end = text.length;
        break;
      }
      // The regex never matches empty text (every alternative consumes a character), so this advances.
      tokens += piece(match[0]);
      end = regex.lastIndex;
      if (end >= stopAfter) break;
    }
    return { tokens, end };
  };

  return {
    countWindow,
    count: (text) => countWindow(text, 0, Infinity).tokens,
  };
}
