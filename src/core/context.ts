/**
 * The working context of an agent: four independent axes.
 * - prefix: the cache-stable head (system prompt, grounding), replaced whole;
 * - messages: the per-turn transcript, the only axis the mutators touch;
 * - scratchpad: notes between steps, last write wins;
 * - journal: append-only authored history with a watermark.
 *
 * This module owns those shapes and the pure operations on them: fork,
 * merge, slice, diff, freeze, and the token budget check. It does not
 * compact, persist or call a model; sessions (the store) and callers do.
 */
import { checkIterable, checkOptions, checkRecord, describeValue } from './args.js';
import { TabulaError } from './errors.js';
import { freezeContext, type FrozenContext } from './frozen.js';
import { MutationJournal } from './journal.js';
import { assertJsonValue, assertSafeKey, cloneJson, deepFreeze, stableKey, structuralEqual, type JsonValue } from './json.js';
import { parseMessage, type Message } from './message.js';
import { PrefixContext } from './prefix.js';
import { applyScope, requireScope, type ContextScope } from './scopes.js';
import { ApproxTokenCounter, type TokenCounter } from './tokens.js';

// The snapshot has a module of its own (frozen.ts); it is named here too, where context.freeze() returns it.
export type { FrozenContext } from './frozen.js';

/** What a {@link WorkingContext} starts from. */
export interface WorkingContextInit {
  /** @default new PrefixContext() */
  prefix?: PrefixContext;
  /** Validated with MessageSchema. @default [] */
  messages?: Iterable<Message>;
  /** @default {} */
  scratchpad?: Record<string, JsonValue>;
  /** @default a new, empty journal */
  journal?: MutationJournal;
  /** @default new ApproxTokenCounter() */
  tokenCounter?: TokenCounter;
  /** Hard token ceiling checked by assertWithinLimit(); null for none. @default null */
  limit?: number | null;
}

/** What differs between two contexts, `this` minus `other`. Deep-frozen. */
export interface ContextDiff {
  /** Messages `this` has more of than `other`, compared by value (a repeat counts). */
  readonly messagesAdded: readonly Message[];
  /** Messages `other` has more of than `this`. */
  readonly messagesRemoved: readonly Message[];
  /** Each key whose value differs, with its value in `this`; null = absent from `this`. */
  readonly scratchpadChanges: Readonly<Record<string, JsonValue | null>>;
  /** True when the two prefixes differ (structurally). */
  readonly prefixChanged: boolean;
}

function requireLimit(limit: number | null): number | null {
  if (limit !== null && (!Number.isSafeInteger(limit) || limit < 0)) {
    throw new TabulaError('argument/invalid', `WorkingContext limit must be a whole number of tokens ≥ 0 or null, got ${describeValue(limit)}.`);
  }
  return limit;
}

function requirePrefix(prefix: unknown): PrefixContext {
  if (!(prefix instanceof PrefixContext)) {
    throw new TabulaError('argument/invalid', 'WorkingContext prefix must be a PrefixContext; build one with new PrefixContext({...}).');
  }
  return prefix;
}

/**
 * Counts how often each message occurs, by value. Two tool-call messages
 * that share a call id but differ in arguments have different keys, so both
 * count: equality is on the whole message, never on an id.
 */
function countByValue(messages: readonly Message[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of messages) {
    const key = stableKey(message);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** `from` minus `subtract` as multisets, in `from`'s order. */
function multisetMinus(from: readonly Message[], subtract: readonly Message[]): Message[] {
  const remaining = countByValue(subtract);
  const out: Message[] = [];
  for (const message of from) {
    const key = stableKey(message);
    const left = remaining.get(key) ?? 0;
    if (left > 0) remaining.set(key, left - 1);
    else out.push(message);
  }
  return out;
}

function requireContext(value: unknown, what: string): void {
  if (!(value instanceof WorkingContext)) throw new TabulaError('argument/invalid', `${what} takes a WorkingContext, got ${describeValue(value)}.`);
}

/** A scratchpad entry's value, after checking its key (a non-empty string, not `__proto__`) and that the value is JSON. */
function scratchpadValue(key: unknown, value: unknown): JsonValue {
  if (typeof key !== 'string' || key === '') {
    throw new TabulaError('argument/invalid', `A scratchpad key must be a non-empty string, got ${describeValue(key)}.`);
  }
  assertSafeKey(key, 'scratchpad key');
  return assertJsonValue(value, `scratchpad key ${JSON.stringify(key)}`);
}

/** An agent's working memory: prefix, messages, scratchpad and journal. */
export class WorkingContext {
  #prefix: PrefixContext;
  #messages: Message[];
  #messagesView: readonly Message[] | null = null;
  #scratchpad: Map<string, JsonValue>;
  /** The journal of mutations recorded on this context. */
  readonly journal: MutationJournal;
  /** Counts this context's tokens (`tokens()`, `assertWithinLimit()`). */
  readonly tokenCounter: TokenCounter;
  /** The hard token ceiling `assertWithinLimit()` checks; null for none. */
  readonly limit: number | null;
  #lock: Promise<unknown> = Promise.resolve();

  constructor(init: WorkingContextInit = {}) {
    init = checkOptions(init, 'new WorkingContext(init)');
    this.#prefix = requirePrefix(init.prefix ?? new PrefixContext());
    this.#messages = [];
    let index = 0;
    for (const message of checkIterable(init.messages === undefined ? [] : init.messages, 'WorkingContext messages')) this.#messages.push(parseMessage(message, `messages[${index++}]`));
    this.#scratchpad = new Map();
    for (const [key, value] of Object.entries(checkRecord(init.scratchpad === undefined ? {} : init.scratchpad, 'WorkingContext scratchpad'))) {
      this.#scratchpad.set(key, scratchpadValue(key, value));
    }
    this.journal = init.journal ?? new MutationJournal();
    this.tokenCounter = init.tokenCounter ?? new ApproxTokenCounter();
    this.limit = requireLimit(init.limit ?? null);
  }

  /** Rebuilds a live context from a snapshot. Its scratchpad values stay frozen: replace them, don't edit them. */
  static fromFrozen(frozen: FrozenContext): WorkingContext {
    const candidate = frozen as Partial<FrozenContext> | null;
    if (typeof candidate?.key !== 'function' || !(candidate.prefix instanceof PrefixContext) || !Array.isArray(candidate.scratchpad)) {
      throw new TabulaError('argument/invalid', `WorkingContext.fromFrozen() takes a FrozenContext (from context.freeze()), got ${describeValue(frozen)}; for data that crossed a worker use fromFrozenData().`);
    }
    return new WorkingContext({
      prefix: frozen.prefix,
      messages: frozen.messages,
      scratchpad: Object.fromEntries(frozen.scratchpad),
      journal: new MutationJournal(frozen.journalEntries),
    });
  }

  /** The cache-stable head. Replaced whole, never edited. */
  get prefix(): PrefixContext {
    return this.#prefix;
  }

  set prefix(prefix: PrefixContext) {
    this.#prefix = requirePrefix(prefix);
  }

  /** The transcript, oldest first: a frozen array of frozen messages. */
  get messages(): readonly Message[] {
    this.#messagesView ??= Object.freeze(this.#messages.slice());
    return this.#messagesView;
  }

  /** Appends one message after validating it; throws `schema/invalid` naming the bad field. */
  append(message: Message): void {
    this.#messages.push(parseMessage(message, `message appended at index ${this.#messages.length}`));
    this.#messagesView = null;
  }

  /** Appends several messages; if any is invalid, none is appended. */
  extend(messages: Iterable<Message>): void {
    const start = this.#messages.length;
    const parsed: Message[] = [];
    for (const message of checkIterable(messages, 'context.extend(messages)')) parsed.push(parseMessage(message, `message appended at index ${start + parsed.length}`));
    if (parsed.length === 0) return;
    this.#messages.push(...parsed);
    this.#messagesView = null;
  }

  /** The scratchpad value under `key`, by reference. */
  get(key: string): JsonValue | undefined {
    return this.#scratchpad.get(key);
  }

  /** Sets a scratchpad value; last write wins. Throws `schema/invalid` for a value that is not JSON. */
  set(key: string, value: JsonValue): void {
    this.#scratchpad.set(key, scratchpadValue(key, value));
  }

  /** Sets several scratchpad values; if any is not JSON, none is set. */
  update(values: Record<string, JsonValue>): void {
    const checked = Object.entries(checkRecord(values, 'context.update(values)')).map(
      ([key, value]) => [key, scratchpadValue(key, value)] as const,
    );
    for (const [key, value] of checked) this.#scratchpad.set(key, value);
  }

  /** Removes a scratchpad key. */
  delete(key: string): void {
    this.#scratchpad.delete(key);
  }

  /** The scratchpad as a frozen object; nested values are the live ones. */
  scratchpad(): Readonly<Record<string, JsonValue>> {
    return Object.freeze(Object.fromEntries(this.#scratchpad));
  }

  #derive(messages: readonly Message[], scratchpad: Record<string, JsonValue>, journal: MutationJournal): WorkingContext {
    const derived = new WorkingContext({
      prefix: this.#prefix,
      scratchpad,
      journal,
      tokenCounter: this.tokenCounter,
      limit: this.limit,
    });
    // The messages are already validated and frozen; share them instead of re-parsing.
    derived.#messages = messages.slice();
    return derived;
  }

  /**
   * An independent copy: its own transcript, a deep copy of the scratchpad,
   * and a new journal seeded with the current entries (committed). The
   * prefix, token counter and limit are shared; they are immutable.
   */
  fork(): WorkingContext {
    const scratchpad: Record<string, JsonValue> = {};
    for (const [key, value] of this.#scratchpad) scratchpad[key] = cloneJson(value);
    return this.#derive(this.#messages, scratchpad, new MutationJournal(this.journal.view()));
  }

  /**
   * Takes in another context's knowledge. `concat` (default) appends its
   * messages as they are; `union` appends only messages not already here by
   * value. Either way its scratchpad overwrites ours key by key (values by
   * reference) and its journal entries are applied after ours.
   */
  merge(other: WorkingContext, options: { mode?: 'concat' | 'union' } = {}): this {
    requireContext(other, 'context.merge(other)');
    const mode = checkOptions(options, 'context.merge(other, options)').mode ?? 'concat';
    if (mode !== 'concat' && mode !== 'union') {
      throw new TabulaError('argument/invalid', `merge mode must be 'concat' or 'union', got ${describeValue(mode)}.`);
    }
    let incoming = other.#messages;
    if (mode === 'union') {
      const seen = new Set(this.#messages.map((message) => stableKey(message)));
      incoming = [];
      for (const message of other.#messages) {
        const key = stableKey(message);
        if (seen.has(key)) continue;
        seen.add(key);
        incoming.push(message);
      }
    }
    if (incoming.length > 0) {
      this.#messages.push(...incoming);
      this.#messagesView = null;
    }
    for (const [key, value] of other.#scratchpad) this.#scratchpad.set(key, value);
    if (other.journal !== this.journal) this.journal.apply(other.journal.view());
    return this;
  }

  /**
   * A new context with only the messages `scope` keeps. The prefix is
   * shared, the scratchpad is a new object with the same values, and the
   * journal is a copy with the same entries and watermark.
   */
  slice(scope: ContextScope): WorkingContext {
    return this.#derive(applyScope(requireScope(scope, 'context.slice(scope)'), this.#messages), Object.fromEntries(this.#scratchpad), this.journal.clone());
  }

  /**
   * What `this` has that `other` lacks and the reverse. Messages compare by
   * value, counting repeats; the journal is left out (it has its own diff).
   */
  diff(other: WorkingContext): ContextDiff {
    requireContext(other, 'context.diff(other)');
    const scratchpadChanges: Record<string, JsonValue | null> = {};
    for (const [key, value] of this.#scratchpad) {
      if (!other.#scratchpad.has(key) || !structuralEqual(value, other.#scratchpad.get(key))) {
        scratchpadChanges[key] = cloneJson(value);
      }
    }
    for (const key of other.#scratchpad.keys()) {
      if (!this.#scratchpad.has(key)) scratchpadChanges[key] = null;
    }
    return deepFreeze({
      messagesAdded: multisetMinus(this.#messages, other.#messages),
      messagesRemoved: multisetMinus(other.#messages, this.#messages),
      scratchpadChanges,
      prefixChanged: !this.#prefix.equals(other.#prefix),
    });
  }

  /** An immutable snapshot; scratchpad values are copied, so later writes here do not reach it. */
  freeze(): FrozenContext {
    // freezeContext sorts the keys.
    const scratchpad = [...this.#scratchpad].map(([key, value]) => [key, cloneJson(value)] as const);
    return freezeContext(this.#prefix, this.#messages, scratchpad, this.journal.view());
  }

  /** Tokens of the prefix and the messages, by the configured counter. */
  tokens(): Promise<number> {
    return this.tokenCounter.count([...this.#prefix.asMessages(), ...this.#messages]);
  }

  /** Returns the token count; throws `context/over-limit` when it exceeds `limit`. */
  async assertWithinLimit(): Promise<number> {
    const tokens = await this.tokens();
    if (this.limit !== null && tokens > this.limit) {
      throw new TabulaError(
        'context/over-limit',
        `The context holds ${tokens} tokens (${this.tokenCounter.name}), over its limit of ${this.limit}; ` +
          'slice it (e.g. lastTurns) or compact older messages into a summary before calling the model.',
      );
    }
    return tokens;
  }

  /**
   * Runs `fn` once every earlier `applyLocked` call on this context has
   * finished, so a multi-step mutation with awaits in between is not
   * interleaved with another one. A failing `fn` does not block later calls.
   */
  applyLocked<T>(fn: (ctx: this) => T | Promise<T>): Promise<T> {
    const result = this.#lock.then(() => fn(this));
    this.#lock = result.catch(() => undefined);
    return result;
  }
}
