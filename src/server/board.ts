/**
 * Blackboard updates on the server: checking a pushed Yjs update before it
 * is stored, and merging a session's stored updates into one. Uses only
 * Yjs's document-free update functions, so nothing here needs a DOM or
 * builds a Y.Doc.
 */
import * as Y from 'yjs';
import { TabulaError } from '../core/errors.js';

/**
 * Decodes a base64 Yjs update and checks it: under `maxBytes` decoded
 * (`sync/too-large`) and a well-formed update (`schema/invalid`). `where`
 * names the item in the error (`items[3].board.update`).
 */
export function decodeBoardUpdate(base64: string, maxBytes: number, where: string): Uint8Array {
  // base64 length bounds the decoded size: refuse before allocating.
  if (Math.floor((base64.length * 3) / 4) - 2 > maxBytes) {
    throw new TabulaError('sync/too-large', `${where} is over the ${maxBytes}-byte limit for one board update; push smaller updates.`);
  }
  const bytes = new Uint8Array(Buffer.from(base64, 'base64'));
  if (bytes.byteLength > maxBytes) {
    throw new TabulaError('sync/too-large', `${where} is ${bytes.byteLength} bytes, over the ${maxBytes}-byte limit for one board update; push smaller updates.`);
  }
  try {
    Y.decodeUpdate(bytes);
  } catch (error) {
    throw new TabulaError('schema/invalid', `${where} is not a Yjs update (it does not decode); send Y.encodeStateAsUpdate output or an update event's bytes.`, { cause: error });
  }
  return bytes;
}

/** One update holding everything the given updates hold. */
export function mergeBoardUpdates(updates: readonly Uint8Array[]): Uint8Array {
  return Y.mergeUpdates(updates as Uint8Array[]);
}

/** Standard base64 of bytes, for the wire. */
export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}
