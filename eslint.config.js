// @ts-check
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const privateFieldRule = { selector: 'PropertyDefinition[key.name=/^_/]', message: 'Use #private fields, not _names.' };

export default tseslint.config(
  // reports/ and .stryker-tmp/: Stryker's reports and sandboxes, present while `npm run mutation` runs;
  // .dist-staging-*/: npm run build's staging folders (scripts/build.mjs); site/: npm run docs's output.
  { ignores: ['dist/', 'site/', '.dist-staging-*/', 'dist-demo/', 'node_modules/', 'test/.tmp/', 'test-results/', 'playwright-report/', 'reports/', '.stryker-tmp/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: { ...globals.browser, ...globals.node },
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', privateFieldRule],
    },
  },
  {
    // Tests pass `async () => value` to APIs that take async functions; that is the idiom, not a slip.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/require-await': 'off' },
  },
  {
    // A property that draws its own seed cannot be replayed: every fc.assert takes fcParams (test/unit/seed.ts),
    // which prints the seed and honours TABULA_SEED and TABULA_RUNS.
    files: ['test/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        privateFieldRule,
        {
          selector: "CallExpression[callee.object.name='fc'][callee.property.name='assert']:not([arguments.1.callee.name='fcParams'])",
          message: 'Pass fcParams(numRuns) from test/unit/seed.ts as fc.assert\'s second argument: a seeded, replayable run.',
        },
      ],
    },
  },
  {
    // The pure core must not reach for the browser or Node.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../*', 'node:*', 'dexie', 'yjs', 'y-*', 'comlink'], message: 'src/core imports only itself and zod.' }] },
      ],
    },
  },
  {
    // The same rule one folder down (src/core/board-update/): `../json.js` is still the core.
    files: ['src/core/*/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../../*', 'node:*', 'dexie', 'yjs', 'y-*', 'comlink'], message: 'src/core imports only itself and zod.' }] },
      ],
    },
  },
  {
    // Tabula's schemas are zod/mini: one value import of classic zod anywhere puts all of its chainable
    // schema classes in every bundle (tabula-sdk/core: 29.9 KB gzip on classic, 12.5 on zod/mini), and
    // `import { z }` defeats tree-shaking. zod/mini has no messages of its own, so every parse goes
    // through core/validation.ts, which supplies them. Type-only imports of classic zod stay allowed
    // (the public `contextSchema` option takes the app's classic schema).
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        privateFieldRule,
        {
          selector: "ImportDeclaration[source.value=/^zod(\\/v4)?(\\/classic)?$/][importKind='value']",
          message: "Use `import * as z from 'zod/mini'`: a value import of classic zod bundles all of it (see scripts/check-size.mjs).",
        },
        {
          selector: "ImportDeclaration[source.value=/^zod\\//] > ImportSpecifier[imported.name='z']",
          message: "Use `import * as z from 'zod/mini'`: `import { z }` bundles all of zod (see scripts/check-size.mjs).",
        },
        {
          selector: "CallExpression[callee.property.name=/^(safeParse|parse|safeParseAsync|parseAsync)$/]:not([callee.object.name='JSON'])",
          message: "Validate with safeParse(schema, value) from src/core/validation.ts: zod/mini alone words every issue as 'Invalid input'.",
        },
      ],
    },
  },
  {
    // The sync client moves bytes and elects a leader; the store decides what the bytes mean. It reaches the
    // store through one contract (src/store/replication/contract.ts: the types, and openReplica), never its
    // internals: a page applied, an outbox read or a meta key written in src/sync would be the store's job
    // done twice. The protocol has its own, stricter rule below.
    files: ['src/sync/**/*.ts'],
    ignores: ['src/sync/protocol.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(store/(?!replication/contract\\.js$)|index\\.js$)',
              message: 'src/sync imports from src/store only src/store/replication/contract.ts (the Replica contract and openReplica).',
            },
          ],
        },
      ],
    },
  },
  {
    // The integrations are built on the public API only, as an app's own code would be: what they need
    // from Tabula is exported, documented and versioned, never reached for in a private module.
    files: ['src/langgraph/**/*.ts', 'src/openai-agents/**/*.ts', 'src/react/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              // A regex, not a gitignore-style group: a group cannot re-include ../sync/index.js once ../* matched ../sync.
              regex: '^\\.\\./(?!(?:index|core/index|sync/index)\\.js$)',
              message: 'An integration imports Tabula only through its public entry points: ../index.js, ../core/index.js, ../sync/index.js.',
            },
          ],
        },
      ],
    },
  },
  {
    // The sync server runs in Node only: it takes the core and the wire protocol, never browser code.
    files: ['src/server/**/*.ts', 'src/sync/protocol.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['dexie', 'y-indexeddb', 'y-protocols/*', 'comlink', '../store/*', '../blackboard/*', '../tokens/*', '../index.js'], message: 'The server and the protocol import only src/core and src/sync/protocol (and Node libraries).' },
          ],
        },
      ],
    },
  },
);
