/**
 * Conversions between message rows, stored messages and wire messages
 * (src/store/stored.ts). The class of bug this guards: a stored message
 * that the app can change (it is shared by every reader of the session, so
 * a change would leak into them), one missing a field of its row, and a
 * wire message that carries the store's own fields (id, order, status,
 * createdAt) to a model provider, or loses one of the message's own
 * (name, tool calls, content parts).
 */
import { describe, expect, it } from 'vitest';
import type { Message } from '../../../src/core/message.js';
import { toStoredMessage, toWireMessage } from '../../../src/store/stored.js';
import { freshTabula } from './helpers.js';

const message = {
  role: 'assistant',
  content: [{ type: 'text', text: 'calling' }],
  tool_calls: [{ id: 'call-1', type: 'function', function: { name: 'f', arguments: '{}' } }],
} as unknown as Message;

describe('stored messages', () => {
  it('toStoredMessage: the message with its row’s id, order, status and createdAt, frozen all the way down', () => {
    const stored = toStoredMessage({ id: 'm1', order: 'o1', status: 'interrupted', createdAt: 7, message });
    expect(stored).toEqual({ ...message, id: 'm1', order: 'o1', status: 'interrupted', createdAt: 7 });
    expect(Object.isFrozen(stored)).toBe(true);
    const parts = (stored as unknown as { content: { text: string }[] }).content;
    expect(Object.isFrozen(parts)).toBe(true);
    expect(Object.isFrozen(parts[0])).toBe(true);
  });

  it('toWireMessage: the message alone, every field of its own kept', () => {
    const stored = toStoredMessage({ id: 'm1', order: 'o1', status: 'complete', createdAt: 7, message });
    expect(toWireMessage(stored)).toEqual(message);
    expect(Object.keys(toWireMessage(stored)).sort()).toEqual(['content', 'role', 'tool_calls']);
  });

  it('a session’s context holds wire messages: no id, order, status or createdAt', async () => {
    const tabula = await freshTabula();
    const session = await tabula.session('s');
    await session.append([{ role: 'user', content: 'hi', name: 'ann' }, { role: 'assistant', content: 'hello' }]);
    const context = await session.toContext();
    expect(context.messages).toEqual([
      { role: 'user', content: 'hi', name: 'ann' },
      { role: 'assistant', content: 'hello' },
    ]);
    await tabula.close();
  });
});
