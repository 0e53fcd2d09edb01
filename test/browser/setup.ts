/**
 * Setup of the `browser` project. Dexie turns its debug mode on for pages served from localhost,
 * as Vitest's are, and in debug mode it `console.trace`s every rejected table request, also one its
 * caller catches: each replayed op whose id the store already holds (a ConstraintError that the
 * apply path expects and counts as a replay) printed a stack trace. Debug mode
 * changes no result: a real failure still rejects and fails its test. Node never turns it on (no
 * `location`), so the unit project runs the same store tests without it.
 */
import { Dexie } from 'dexie';
// A test that writes to console.error/warn/trace without saying so fails (see the module).
import '../console-guard.js';

Dexie.debug = false;
