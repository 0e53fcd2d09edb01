/**
 * What a message costs in tokens, defined once. Every counter, the
 * approximate one here and the exact tokenizer counters, measures the same
 * pieces of a message (see {@link messageTokenText}) plus the same fixed
 * overheads, so a cheap pre-check and an exact count disagree only by the
 * tokenizer's precision, never by what they looked at.
 *
 * The exact counters live outside the core (they need a tokenizer and a
 * worker); this module holds the contract and the dependency-free estimate.
 */
import type { Message } from './message.js';

/** Counts the tokens a list of messages costs with one tokenizer. */
export interface TokenCounter {
  /** The tokenizer: 'approx', 'o200k_base', 'cl100k_base'… Cached counts are keyed by it. */
  readonly name: string;
  /** Tokens of all the messages together. Pure: the same messages give the same number. */
  count(messages: readonly Message[]): Promise<number>;
  /**
   * Tokens of each message, in one call. Optional: stores use it to cache a
   * count per message (falling back to one `count` call per message), so a
   * counter behind a worker should implement it to save round trips.
   */
  countEach?(messages: readonly Message[]): Promise<number[]>;
  /**
   * Like countEach, saying per message whether the count is exact. Optional:
   * a counter that can fall back to an estimate (a worker past its time
   * budget) implements it, and stores cache only exact counts.
   */
  measureEach?(messages: readonly Message[]): Promise<TokenMeasure[]>;
}

/** A token count and whether it is exact (false: an estimate a counter fell back to; never cache it). */
export interface TokenMeasure {
  /** The count, in tokens. */
  readonly tokens: number;
  /** True when counted by the tokenizer, false when estimated. */
  readonly exact: boolean;
}

/**
 * Tokens the chat format adds around every message (role and separator
 * markers). OpenAI's chat models spend 3–4 per message; we count 4.
 */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** Tokens charged for an image part: the base cost of a low-detail image. */
export const IMAGE_PART_TOKENS = 85;

/**
 * The text of a message that a tokenizer reads: role, name, every text
 * part, and each tool call's name and arguments, joined by newlines. Image
 * parts are not text: a count charges 85 tokens for each (the base cost of
 * a low-detail image) on top of this text, as it adds 4 per message.
 */
export function messageTokenText(message: Message): string {
  const pieces: string[] = [message.role];
  if (message.name !== undefined) pieces.push(message.name);
  if (typeof message.content === 'string') pieces.push(message.content);
  else if (message.content !== null) {
    for (const part of message.content) if (part.type === 'text') pieces.push(part.text);
  }
  for (const call of message.tool_calls ?? []) pieces.push(call.function.name, call.function.arguments);
  if (message.tool_call_id !== undefined) pieces.push(message.tool_call_id);
  return pieces.join('\n');
}

/** Tokens a message costs beyond its text: the per-message overhead and its images. */
export function messageFixedTokens(message: Message): number {
  let images = 0;
  if (Array.isArray(message.content)) {
    for (const part of message.content) if (part.type === 'image_url') images++;
  }
  return MESSAGE_OVERHEAD_TOKENS + images * IMAGE_PART_TOKENS;
}

/** chars / 4, rounded up: about right for English, low for CJK scripts. */
export function estimateTextTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** The estimate of one message: ceil(chars / 4) of its token text, tool calls included, plus fixed costs. */
export function estimateMessageTokens(message: Message): number {
  return estimateTextTokens(messageTokenText(message)) + messageFixedTokens(message);
}

/** A free, synchronous-cost counter: the sum of {@link estimateMessageTokens}. */
export class ApproxTokenCounter implements TokenCounter {
  readonly name = 'approx';

  count(messages: readonly Message[]): Promise<number> {
    let total = 0;
    for (const message of messages) total += estimateMessageTokens(message);
    return Promise.resolve(total);
  }

  countEach(messages: readonly Message[]): Promise<number[]> {
    return Promise.resolve(messages.map(estimateMessageTokens));
  }
}
