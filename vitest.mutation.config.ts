/**
 * Vitest config for mutation testing (`npm run mutation`): the Node `unit`
 * project only, without the tests that exercise the built package or the
 * scripts (they never run code under src/core, store, blackboard, tokens).
 * MUTATION_TESTS=<glob>[,<glob>…] narrows the tests (a quicker, lower-bound
 * score for one folder: its own tests only).
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const repoRoot = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  test: {
    root: repoRoot,
    environment: 'node',
    include: process.env.MUTATION_TESTS?.split(',') ?? ['test/unit/**/*.test.ts'],
    exclude: ['test/unit/package.test.ts', 'test/unit/scripts/**', '**/node_modules/**'],
    setupFiles: ['test/unit/setup.ts', 'test/unit/mutation-setup.ts'],
    // Stryker reruns the covering tests once per mutant: importing Dexie, Yjs and zod again for each test
    // file cost most of that time. The tests use unique database names, so they can share modules.
    isolate: false,
    // Instrumented code runs several times slower: property tests need room.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
