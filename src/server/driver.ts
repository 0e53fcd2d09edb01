/**
 * Loads a storage driver (better-sqlite3, pg) when a store is created, never
 * at import time. Both are optional peer dependencies, so a browser user of
 * `tabula-sdk` never compiles native code; a server user who forgot one gets
 * an error naming the package to install.
 */
import { createRequire } from 'node:module';
import { TabulaError } from '../core/errors.js';

const require = createRequire(import.meta.url);

/** `require(name)` for a store, or `server/driver-missing` saying what to install. */
export function loadDriver<T>(name: string, store: string): T {
  try {
    return require(name) as T;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'MODULE_NOT_FOUND') {
      throw new TabulaError('server/driver-missing', `${store} needs the "${name}" package, which is not installed. Run \`npm install ${name}\` next to tabula-sdk.`, { cause: error });
    }
    throw error;
  }
}
