/**
 * The cache-stable head of a prompt: system prompt, grounding messages and
 * an optional schema block. It is frozen once built because providers cache
 * prompts by prefix: changing a byte of it invalidates every cached token
 * after that byte. To change it, build a new one.
 */
import { checkIterable, checkOptions, describeValue } from './args.js';
import { TabulaError } from './errors.js';
import { stableKey } from './json.js';
import { parseMessages, type Message } from './message.js';

/** What a {@link PrefixContext} is built from. */
export interface PrefixInit {
  /** @default '' (no system message) */
  systemPrompt?: string;
  /** Messages pinned after the system prompt, in order. @default [] */
  grounding?: readonly Message[];
  /** Structured-output instructions, pinned as a last system message. @default null */
  schemaBlock?: string | null;
}

/** An immutable prompt head with structural equality. */
export class PrefixContext {
  /** The system prompt; '' for none (then no system message leads the prompt). */
  readonly systemPrompt: string;
  /** Messages pinned after the system prompt, validated and frozen. */
  readonly grounding: readonly Message[];
  /** Structured-output instructions pinned as a last system message; null for none. */
  readonly schemaBlock: string | null;
  #key: string | undefined;

  constructor(init: PrefixInit = {}) {
    const { systemPrompt = '', grounding = [], schemaBlock = null } = checkOptions(init, 'new PrefixContext(init)');
    if (typeof systemPrompt !== 'string') {
      throw new TabulaError('argument/invalid', 'PrefixContext: systemPrompt must be a string.');
    }
    if (schemaBlock !== null && typeof schemaBlock !== 'string') {
      throw new TabulaError('argument/invalid', 'PrefixContext: schemaBlock must be a string or null.');
    }
    this.systemPrompt = systemPrompt;
    this.grounding = Object.freeze(parseMessages(checkIterable(grounding, 'PrefixContext grounding'), 'PrefixContext grounding'));
    this.schemaBlock = schemaBlock;
    Object.freeze(this);
  }

  /**
   * The prefix as messages, in the order they are sent: the system prompt
   * (when not empty), the grounding messages, then the schema block as a
   * system message (when set). A new array on every call; the messages in
   * it are frozen.
   */
  asMessages(): Message[] {
    const out: Message[] = [];
    if (this.systemPrompt !== '') out.push(Object.freeze({ role: 'system', content: this.systemPrompt }));
    out.push(...this.grounding);
    if (this.schemaBlock !== null) out.push(Object.freeze({ role: 'system', content: this.schemaBlock }));
    return out;
  }

  /** A string equal for two prefixes exactly when they are structurally equal. */
  key(): string {
    // Frozen fields make the key safe to compute once; #key is the only mutable slot.
    this.#key ??= stableKey([this.systemPrompt, this.grounding, this.schemaBlock]);
    return this.#key;
  }

  /** Structural equality: same prompt, same grounding messages, same schema block. */
  equals(other: PrefixContext): boolean {
    if (!(other instanceof PrefixContext)) throw new TabulaError('argument/invalid', `prefix.equals(other) compares with a PrefixContext, got ${describeValue(other)}.`);
    return this === other || this.key() === other.key();
  }
}
