/**
 * An app with its own, older Yjs and Dexie installs the packed tarball and
 * ends up with one copy of each: `npm ls` shows Tabula using the app's
 * copies, the app's Vite build holds one Yjs and one Dexie, and in Chromium
 * a `Y.Text` the app creates goes into `session.blackboard.doc` and reaches
 * another Tabula instance on the same database.
 *
 * Guards the bug of exact-pinned dependencies: two Yjs copies made
 * `blackboard.doc instanceof Y.Doc` false and inserting the app's Y.Text
 * threw "Unexpected content type".
 *
 * The app is installed from the npm registry (`--prefer-offline`, so the
 * npm cache serves it when it can); the versions below are the floors of
 * the peer ranges in package.json, so the floors are what is tested.
 */
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> };

/** The app's own copies: older than the versions Tabula is developed against. */
const APP_PEERS = { yjs: '13.6.0', dexie: '4.0.1', 'y-protocols': '1.0.6' } as const;

// Strings each library holds once: counting them in the app's bundle counts the copies.
const ONE_PER_COPY = { yjs: 'Yjs was already imported', dexie: 'Transaction has already completed or failed' } as const;

// Outside the repository, so Node and Vite cannot fall back to the repository's node_modules.
let app = '';
let out = '';
let server: Server | undefined;
let url = '';

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json' };

function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

interface LsNode {
  version?: string;
  dependencies?: Record<string, LsNode>;
}

/** Every version of `name` anywhere in an `npm ls --all --json` tree. */
function versionsIn(tree: LsNode, name: string, found = new Set<string>()): Set<string> {
  for (const [dep, node] of Object.entries(tree.dependencies ?? {})) {
    if (dep === name && node.version) found.add(node.version);
    versionsIn(node, name, found);
  }
  return found;
}

/** Directories named `name` under any node_modules of the app: one per copy on disk. */
function copiesOnDisk(dir: string, name: string): string[] {
  const copies: string[] = [];
  const modules = join(dir, 'node_modules');
  if (!existsSync(modules)) return copies;
  for (const entry of readdirSync(modules)) {
    const path = join(modules, entry);
    if (entry.startsWith('@')) {
      for (const scoped of readdirSync(path)) copies.push(...copiesOnDisk(join(path, scoped), name));
      continue;
    }
    if (entry === name) copies.push(path);
    copies.push(...copiesOnDisk(path, name));
  }
  return copies;
}

test.beforeAll(async () => {
  test.setTimeout(300_000);
  for (const [name, version] of Object.entries(APP_PEERS)) {
    expect(pkg.peerDependencies[name], `the peer range of ${name} starts at the version this test installs`).toBe(`^${version}`);
  }
  app = mkdtempSync(join(tmpdir(), 'tabula-consumer-peers-'));
  out = join(app, 'dist');
  run('npm', ['run', '--silent', 'build'], root);
  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', app], root)) as [{ filename: string }];
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies: { ...APP_PEERS, 'tabula-sdk': `file:./${packed.filename}` } }, null, 2),
  );
  try {
    run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], app);
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`Installing the consumer app needs the npm registry, or these versions in the npm cache (${JSON.stringify(APP_PEERS)}):\n${stderr}`, {
      cause: error,
    });
  }

  writeFileSync(join(app, 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="./main.js"></script>');
  writeFileSync(
    join(app, 'main.js'),
    `import * as Y from 'yjs';
import { openTabula } from 'tabula-sdk';

async function main() {
  const name = 'consumer-' + crypto.randomUUID();
  const tabA = await openTabula({ name });
  const tabB = await openTabula({ name });
  const inA = await tabA.session('doc');
  const inB = await tabB.session('doc');
  await Promise.all([inA.blackboard.whenLoaded, inB.blackboard.whenLoaded]);
  const bodyInB = inB.blackboard.doc.getMap('editor');
  const arrived = new Promise((resolve) => bodyInB.observeDeep(() => bodyInB.get('body')?.toString() === 'hello world' && resolve()));

  // The editor binding's move: the app's own Y.Text, inserted into Tabula's document.
  const text = new Y.Text('hello');
  inA.blackboard.doc.getMap('editor').set('body', text);
  text.insert(5, ' world');
  await inA.blackboard.flushed();
  await arrived;

  const result = {
    docIsAppYDoc: inA.blackboard.doc instanceof Y.Doc,
    textInA: inA.blackboard.doc.getMap('editor').get('body').toString(),
    textInB: bodyInB.get('body').toString(),
    bIsAppYText: bodyInB.get('body') instanceof Y.Text,
  };
  await tabA.deleteSession('doc');
  await tabA.close();
  await tabB.close();
  return result;
}
window.result = main();
`,
  );
  await build({ root: app, logLevel: 'silent', configFile: false, build: { outDir: out, emptyOutDir: true } });

  server = createServer((req, res) => {
    const pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const path = join(out, pathname.endsWith('/') ? `${pathname}index.html` : pathname);
    readFile(path).then(
      (body) => {
        res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' });
        res.end(body);
      },
      () => {
        res.writeHead(404);
        res.end();
      },
    );
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

test.afterAll(async () => {
  if (server) await new Promise((resolve) => server!.close(resolve));
  if (app) rmSync(app, { recursive: true, force: true });
});

test('npm resolves Tabula onto the app’s own yjs, y-protocols and dexie: one copy of each', () => {
  const tree = JSON.parse(run('npm', ['ls', '--all', '--json'], app)) as LsNode;
  for (const [name, version] of Object.entries(APP_PEERS)) {
    expect([...versionsIn(tree, name)], `${name} versions in npm ls`).toEqual([version]);
    expect(copiesOnDisk(app, name), `${name} copies on disk`).toEqual([join(app, 'node_modules', name)]);
  }
});

test('the app’s Vite build holds one Yjs and one Dexie', () => {
  const code = readdirSync(join(out, 'assets'))
    .filter((file) => file.endsWith('.js'))
    .map((file) => readFileSync(join(out, 'assets', file), 'utf8'))
    .join('\n');
  for (const [name, marker] of Object.entries(ONE_PER_COPY)) {
    expect(code.split(marker).length - 1, `copies of ${name} in the build`).toBe(1);
  }
});

test('in Chromium, an app-created Y.Text goes into session.blackboard.doc and reaches another instance', async ({ page }) => {
  const warnings: string[] = [];
  page.on('console', (message) => warnings.push(message.text()));
  await page.goto(url);
  const result = await page.evaluate(() => (window as unknown as { result: Promise<Record<string, unknown>> }).result);
  expect(result).toEqual({ docIsAppYDoc: true, textInA: 'hello world', textInB: 'hello world', bIsAppYText: true });
  expect(warnings.filter((text) => text.includes(ONE_PER_COPY.yjs))).toEqual([]);
});
