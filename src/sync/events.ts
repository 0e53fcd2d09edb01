/**
 * Reads the server's `/v1/events` stream with fetch (so the token travels
 * in the Authorization header, never in the URL) and calls `onPoke` for
 * each `poke` event with its data (the event's `data:` lines, joined as SSE
 * joins them), and `onExpired` for the `expired` event that ends a stream
 * whose token is no longer accepted. Heartbeat comments and other events are
 * skipped.
 */

/**
 * Reads one open event stream until it ends (resolves) or `signal` aborts (cancels the stream, so a
 * fetch that does not end its body on abort, such as a server called in-process, cannot keep it open).
 */
export async function readPokes(body: ReadableStream<Uint8Array>, signal: AbortSignal, onPoke: (data: string) => void, onExpired: () => void = () => {}): Promise<void> {
  const reader = body.getReader();
  const cancel = () => void reader.cancel().catch(() => undefined);
  if (signal.aborted) cancel();
  signal.addEventListener('abort', cancel);
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (/^event: ?expired$/m.test(block)) onExpired();
        if (!/^event: ?poke$/m.test(block)) continue;
        const data = block
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
        onPoke(data.join('\n'));
      }
    }
  } finally {
    signal.removeEventListener('abort', cancel);
    reader.releaseLock();
  }
}
