/**
 * Error answers: the one shape every error of the protocol takes
 * (`{error: {code, message}}`), the HTTP status of each code, and the
 * mapping of whatever a route throws to an answer. An error that is not a
 * protocol error is logged here and answered without its details, so no
 * answer carries another user's data or the server's internals.
 */
import type { Context } from 'hono';
import { isTabulaError } from '../core/errors.js';
import type { ErrorResponse, SyncErrorCode } from '../sync/protocol.js';

/** The HTTP status of each error code of the protocol. */
const STATUS: Record<SyncErrorCode, 400 | 401 | 403 | 404 | 408 | 409 | 413 | 429 | 500> = {
  'schema/invalid': 400,
  'sync/unauthorized': 401,
  'sync/forbidden': 403,
  'sync/not-found': 404,
  'sync/timeout': 408,
  'sync/gap': 409,
  'sync/too-large': 413,
  'sync/rate-limited': 429,
  'storage/failed': 500,
};

/** An error answer's body; `extra` carries what a client needs to continue (the server's lastSeq, or its head). */
export function errorBody(code: SyncErrorCode, message: string, extra: { lastSeq?: number; head?: number } = {}): ErrorResponse {
  return { error: { code, message, ...extra } };
}

/** The answer to an error a route threw: its own code and status for a protocol error, 503 while closing, else 500. */
export function toErrorResponse(c: Context, error: unknown): Response {
  if (isTabulaError(error) && error.code in STATUS) {
    const code = error.code as SyncErrorCode;
    const headers: Record<string, string> = code === 'sync/unauthorized' ? { 'WWW-Authenticate': 'Bearer' } : {};
    return c.json(errorBody(code, error.message), STATUS[code], headers);
  }
  if (isTabulaError(error, 'storage/closed')) return c.json(errorBody('storage/failed', 'The server is shutting down; retry.'), 503);
  console.error('tabula-server: request failed', error);
  return c.json(errorBody('storage/failed', 'The server could not complete the request; retry later.'), 500);
}
