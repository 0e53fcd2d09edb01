// @ts-check
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const privateFieldRule = { selector: 'PropertyDefinition[key.name=/^_/]', message: 'Use #private fields, not _names.' };

export default tseslint.config(
  { ignores: ['dist/', 'dist-demo/', 'node_modules/', 'test/.tmp/', 'test-results/', 'playwright-report/'] },
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
    // `import { z } from 'zod'` makes esbuild and webpack bundle every zod locale and the JSON Schema
    // code (tabula-sdk/core: 97 KB gzip with it, 29 KB without); the namespace import lets them tree-shake.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        privateFieldRule,
        {
          selector: "ImportDeclaration[source.value='zod'][importKind='value'] > ImportSpecifier[imported.name='z'][importKind='value']",
          message: "Use `import * as z from 'zod'`: `import { z }` bundles all of zod (see scripts/check-size.mjs).",
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
