/**
 * A store whose driver is not installed says which package to install
 * (better-sqlite3 and pg are optional peer dependencies).
 */
import { expect, it } from 'vitest';
import { loadDriver } from '../../src/server/driver.js';

it('names the missing package and the command to install it', () => {
  expect(() => loadDriver('tabula-no-such-driver', 'sqliteStore')).toThrow(
    expect.objectContaining({ code: 'server/driver-missing', message: expect.stringContaining('npm install tabula-no-such-driver') as string }),
  );
});

it('loads an installed driver', () => {
  expect(loadDriver<{ Pool: unknown }>('pg', 'postgresStore').Pool).toBeTypeOf('function');
});
