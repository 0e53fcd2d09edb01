/**
 * The public API, pinned: the exact runtime exports of every entry point in
 * package.json's `exports`. Each entry exports what the README documents and
 * nothing else; a helper the modules share stays in its source file, and a
 * test that needs it imports it from there. A name added to or removed from
 * an entry fails here, so widening (or narrowing) the API is a deliberate
 * change: update this list, the README and the CHANGELOG together.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

const CORE = [
  'ApproxTokenCounter',
  'JsonValueSchema',
  'MessageSchema',
  'MutationJournal',
  'OpSchema',
  'PrefixContext',
  'PrefixDataSchema',
  'StateFieldsSchema',
  'TabulaError',
  'WorkingContext',
  'allOf',
  'anyOf',
  'applyScope',
  'compareHlc',
  'createHlc',
  'deepFreeze',
  'estimateMessageTokens',
  'fromFrozenData',
  'isTabulaError',
  'lastTurns',
  'makeOp',
  'messageText',
  'messageTokenText',
  'not',
  'parseMessage',
  'parseOp',
  'since',
  'stableKey',
  'structuralEqual',
  'tagged',
  'toFrozenData',
];

/** Each `exports` subpath of package.json, its source module, and the names it exports at runtime. */
const ENTRIES: Record<string, { source: string; names: string[] }> = {
  '.': {
    source: 'src/index.ts',
    names: [...CORE, 'SessionExportSchema', 'createBlackboard', 'createTokenCounter', 'openTabula', 'parseSessionExport'],
  },
  './core': { source: 'src/core/index.ts', names: CORE },
  './sync': {
    source: 'src/sync/index.ts',
    names: [
      'DEFAULT_SYNC_LIMITS',
      'ErrorResponseSchema',
      'PROTOCOL_VERSION',
      'PokeEventSchema',
      'PullRequestSchema',
      'PullResponseSchema',
      'PushRequestSchema',
      'PushResponseSchema',
      'SYNC_HEADERS',
      'SYNC_PATHS',
      'httpSync',
    ],
  },
  './server': { source: 'src/server/index.ts', names: ['DEFAULT_SYNC_LIMITS', 'createSyncServer', 'postgresStore', 'sqliteStore'] },
  './react': {
    source: 'src/react/index.ts',
    names: ['TabulaProvider', 'createLiveQuery', 'useBlackboard', 'useMessages', 'useSession', 'useSessions', 'useSyncStatus', 'useTabula', 'useTokens'],
  },
  './langgraph': { source: 'src/langgraph/index.ts', names: ['TabulaCheckpointSaver'] },
  './openai-agents': { source: 'src/openai-agents/index.ts', names: ['TabulaAgentsSession', 'toChatMessages'] },
  // A worker script serves at import and exports nothing.
  './token-worker/o200k_base': { source: 'src/tokens/o200k-worker.ts', names: [] },
  './token-worker/cl100k_base': { source: 'src/tokens/cl100k-worker.ts', names: [] },
};

const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, unknown> };
const sorted = (names: readonly string[]) => [...names].sort();

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('public entry points', () => {
  it('are the subpaths of package.json exports, each with a pinned list', () => {
    expect(sorted(Object.keys(ENTRIES))).toEqual(sorted(Object.keys(pkg.exports).filter((entry) => entry !== './package.json')));
  });

  it.each(Object.entries(ENTRIES))('%s exports exactly its documented names', async (_entry, { source, names }) => {
    if (source.endsWith('-worker.ts')) {
      // The worker serves on `self` when imported: give it a port to serve on.
      const { port1, port2 } = new MessageChannel();
      vi.stubGlobal('self', port2);
      try {
        expect(Object.keys((await import(/* @vite-ignore */ `${root}${source}`)) as object)).toEqual([]);
      } finally {
        port1.close();
        port2.close();
      }
      return;
    }
    const module = (await import(/* @vite-ignore */ `${root}${source}`)) as Record<string, unknown>;
    expect(sorted(Object.keys(module))).toEqual(sorted(names));
  }, 60_000);

  it('tabula-sdk re-exports tabula-sdk/core as it is', async () => {
    const [main, core] = await Promise.all([import('../../src/index.js'), import('../../src/core/index.js')]);
    for (const name of CORE) expect((main as Record<string, unknown>)[name], name).toBe((core as Record<string, unknown>)[name]);
  });
});
