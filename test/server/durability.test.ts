/**
 * "Acknowledged means on disk" on SQLite, proven at the system call: a SIGKILL
 * cannot prove it (the kernel keeps page-cache writes of a killed process, so
 * the crash test passes even with `synchronous=OFF`). The real `tabula-server`
 * runs under strace, and the database's write-ahead log must have been synced
 * (fsync/fdatasync) at least once per acknowledged push.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, expect, it } from 'vitest';
import { SECRET, noteOp, tokenFor, uniqueUser } from './helpers.js';
import { cliBundle } from './process.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'tabula-durable-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const strace = spawnSync('strace', ['-V']);
if (strace.error) {
  throw new Error('This test needs strace to count the server\'s fsyncs: install it with `apt-get install -y strace` (.ci/run does).');
}

const PUSHES = 12;

it('fsyncs the SQLite write-ahead log for every acknowledged push', async () => {
  const db = path.join(dir, 'durable.db');
  const trace = path.join(dir, 'syncs.trace');
  // -f: better-sqlite3 commits on the main thread, but follow threads anyway; -y: name each fd's file.
  const child = spawn('strace', ['-f', '-y', '-e', 'trace=fsync,fdatasync', '-o', trace, process.execPath, cliBundle(), '--port', '0', '--db', db], {
    env: { ...process.env, TABULA_JWT_SECRET: SECRET },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = / listening on (\S+)/.exec(line);
      if (match) resolve(match[1]!);
    });
    void exited.then((code) => reject(new Error(`tabula-server under strace exited (${code}) before listening`)));
  });

  const alice = uniqueUser('alice');
  const token = await tokenFor(alice);
  for (let seq = 1; seq <= PUSHES; seq++) {
    const response = await fetch(`${url}/v1/push`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ clientId: 'laptop', items: [{ seq, op: noteOp(alice, 's1', seq) }] }),
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
  }
  // The server itself, not strace (which would detach and leave it running): strace ends with it.
  const server = Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/)[0]);
  process.kill(server, 'SIGTERM');
  await exited;

  // Lines like `1234 fdatasync(12</tmp/…/durable.db-wal>) = 0`. In WAL mode SQLite syncs the log at each
  // commit only with synchronous=FULL; with NORMAL or OFF a commit syncs nothing (NORMAL syncs at
  // checkpoints), so fewer syncs than pushes means an acknowledged push could be lost with the power.
  const walSyncs = readFileSync(trace, 'utf8')
    .split('\n')
    .filter((line) => /\b(fsync|fdatasync)\(\d+<[^>]*durable\.db-wal>\) = 0/.test(line));
  expect(walSyncs.length).toBeGreaterThanOrEqual(PUSHES);
});
