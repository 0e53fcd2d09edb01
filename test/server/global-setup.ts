/**
 * Vitest global setup of the `server` project: one embedded PostgreSQL for
 * the whole run, its URL handed to the tests with `inject('postgresUrl')`.
 */
import type { TestProject } from 'vitest/node';
import { startPostgres } from './embedded-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const postgres = await startPostgres();
  project.provide('postgresUrl', postgres.url);
  return () => postgres.stop();
}
