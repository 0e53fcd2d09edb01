/**
 * Vitest global setup of the `server` project: one embedded PostgreSQL for
 * the whole run, its URL handed to the tests with `inject('postgresUrl')`,
 * and on it a second database whose default collation is ICU's `en-US`
 * (`inject('postgresIcuUrl')`), so the stores are also tested where text
 * does not sort in code-unit order.
 */
import type { TestProject } from 'vitest/node';
import { createIcuDatabase, startPostgres } from './embedded-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
    postgresIcuUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const postgres = await startPostgres();
  try {
    project.provide('postgresUrl', postgres.url);
    project.provide('postgresIcuUrl', await createIcuDatabase(postgres.url, 'tabula_icu'));
  } catch (error) {
    await postgres.stop();
    throw error;
  }
  return () => postgres.stop();
}
