/**
 * Reading a request body within the server's limits: a size cap and a
 * deadline, so that no client can make the server buffer more than
 * `maxBodyBytes` or hold a connection for longer than `bodyTimeoutMs`, and
 * the parse of the JSON it holds. What the JSON must say is the routes'
 * business.
 */
import { TabulaError } from '../core/errors.js';

/**
 * Reads a body of at most `maxBytes` within `timeoutMs` without buffering
 * more than that. A body with `Content-Length` is read in one go (the HTTP
 * parser delivers no more than it declares; @hono/node-server then reads it
 * straight from the socket, without a web stream) and its size checked
 * again; a chunked body is counted as it comes and cut off past the limit.
 * A body still arriving at the deadline is refused with 408: it would hold
 * a connection and up to `maxBytes` of memory for as long as its sender
 * likes. Either way nothing reaches the store.
 */
export async function readBody(request: Request, maxBytes: number, timeoutMs: number): Promise<unknown> {
  const tooLarge = (): TabulaError => new TabulaError('sync/too-large', `The request body is over the ${maxBytes}-byte limit; split the push.`);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TabulaError('sync/timeout', `The request body did not arrive within ${timeoutMs} ms; nothing of it was stored. Retry (a smaller push on a slow connection).`)),
      timeoutMs,
    );
  });
  const declared = request.headers.get('content-length');
  let bytes: Buffer;
  try {
    if (declared !== null && /^\d+$/.test(declared)) {
      if (Number(declared) > maxBytes) throw tooLarge();
      const reading = request.arrayBuffer();
      // Past the deadline nobody awaits it; the host ends it with the connection.
      reading.catch(() => undefined);
      bytes = Buffer.from(await Promise.race([reading, deadline]));
      if (bytes.byteLength > maxBytes) throw tooLarge();
    } else {
      const chunks: Uint8Array[] = [];
      let size = 0;
      if (request.body) {
        const reader = request.body.getReader();
        for (;;) {
          let chunk: ReadableStreamReadResult<Uint8Array>;
          try {
            chunk = await Promise.race([reader.read(), deadline]);
          } catch (error) {
            await reader.cancel().catch(() => undefined);
            throw error;
          }
          const { done, value } = chunk;
          if (done) break;
          size += value.byteLength;
          if (size > maxBytes) {
            await reader.cancel();
            throw tooLarge();
          }
          chunks.push(value);
        }
      }
      bytes = Buffer.concat(chunks);
    }
  } finally {
    clearTimeout(timer);
  }
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new TabulaError('schema/invalid', 'The request body is not JSON; send `Content-Type: application/json` with a JSON object.');
  }
}
