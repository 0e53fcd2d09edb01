/** Conversions between message rows, stored messages and wire messages. */
import { deepFreeze } from '../core/json.js';
import type { Message } from '../core/message.js';
import type { MessageRow } from './db/rows.js';
import type { StoredMessage } from './types.js';

/** A frozen StoredMessage from a row (or the fields of one). */
export function toStoredMessage(row: Pick<MessageRow, 'id' | 'order' | 'status' | 'createdAt' | 'message'>): StoredMessage {
  return deepFreeze({ ...row.message, id: row.id, order: row.order, status: row.status, createdAt: row.createdAt });
}

/** The wire message of a stored one (drops id, order, status, createdAt). */
export function toWireMessage(stored: StoredMessage): Message {
  const { id: _id, order: _order, status: _status, createdAt: _createdAt, ...message } = stored;
  return message;
}

