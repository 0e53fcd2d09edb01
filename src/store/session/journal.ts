/**
 * A session's persisted journal: a MutationJournal (core/journal.ts) whose
 * entries and watermark live in IndexedDB, so they survive reloads and every
 * tab sees the same journal. Entries are written as `journal.append` ops and
 * the watermark as `journal.commit` ops, through the handle's write path; the
 * in-memory journal of a WorkingContext is built from them by the handle's
 * `toContext()`.
 */
import { TabulaError, formatPath } from '../../core/errors.js';
import { findJsonProblem, type JsonValue } from '../../core/json.js';
import { checkRow } from '../db/rows.js';
import { journalRows, type HandleScope } from './scope.js';

/** The persisted journal of a session: a MutationJournal whose entries and watermark survive reloads. */
export interface SessionJournal {
  /** Appends one entry; durable when the promise resolves. An entry that is not JSON throws `schema/invalid`. */
  record(entry: JsonValue): Promise<void>;
  /**
   * Appends a batch in order, in one write: every entry lands or none does. Anything but an array throws
   * `argument/invalid`; an entry that is not JSON throws `schema/invalid` naming its index.
   */
  apply(entries: JsonValue[]): Promise<void>;
  /** The entries past the watermark (not yet acknowledged with `markCommitted()`), oldest first. */
  diff(): Promise<JsonValue[]>;
  /** Acknowledges every entry recorded so far, in any tab: the watermark moves past them and `diff()` is empty. */
  markCommitted(): Promise<void>;
  /** Every entry, committed or not, oldest first. */
  view(): Promise<JsonValue[]>;
}

/** The session's journal entries from `offset` on, each row validated. */
export async function readJournal(scope: HandleScope, offset = 0): Promise<JsonValue[]> {
  const rows = await scope.read('read the journal', () => journalRows(scope).offset(offset).toArray());
  return rows.map((row) => checkRow('journal', row.id, row).entry);
}

/** The journal of the handle that `scope` belongs to. */
export function createJournal(scope: HandleScope): SessionJournal {
  const { label, write, readRow } = scope;
  const journal: SessionJournal = {
    async record(entry) {
      await journal.apply([entry]);
    },
    async apply(entries) {
      if (!Array.isArray(entries)) throw new TabulaError('argument/invalid', 'journal.apply() takes an array of JSON entries.');
      entries.forEach((entry, index) => {
        const problem = findJsonProblem(entry);
        if (problem) {
          throw new TabulaError('schema/invalid', `journal entry [${index}] of ${label} is not JSON at ${formatPath(problem.path)}: ${problem.message}.`, { issues: [problem] });
        }
      });
      if (entries.length === 0) return;
      await write('record journal entries', async (tx) => {
        tx.existing();
        await tx.emit('journal.append', { entries });
      });
    },
    async diff() {
      return readJournal(scope, (await readRow()).journalWatermark);
    },
    async markCommitted() {
      await write('commit the journal', async (tx) => {
        const row = tx.existing();
        const last = await journalRows(scope).last();
        if (!last) return;
        await tx.emit('journal.commit', { watermark: row.journalCount, through: last.order });
      });
    },
    async view() {
      return readJournal(scope);
    },
  };
  return journal;
}
