/**
 * The session's mutation journal: entries are stored once (keyed by their
 * op, or by the id an import's body names) and placed by its order; a
 * commit names the last entry it covers, and the watermark counts the
 * entries up to the greatest one named, so a commit may arrive before its
 * entries and another device's later entries stay pending. Commits that
 * count entries instead (older data) are legacy.ts's.
 */
import { subOrder } from '../../core/hlc.js';
import { sessionRange } from '../db/schema.js';
import * as legacy from './legacy.js';
import { changed, type Rule } from './slot.js';

/** journal.append: stores the op's entries once, committed at once when a commit already named their place. */
export const appendJournal: Rule<'journal.append'> = async (db, slot, row, op) => {
  // Keyed and placed by the op, or by what its body names (an import's: two imports of one history store its entries once).
  const key = op.body.id ?? op.id;
  const base = op.body.order ?? op.order;
  if (await db.journal.get(`${key}:0`)) return false;
  await db.journal.bulkAdd(
    op.body.entries.map((entry, index) => ({
      id: `${key}:${index}`,
      userId: op.userId,
      sessionId: op.sessionId,
      order: subOrder(base, index),
      entry,
    })),
  );
  row.journalCount += op.body.entries.length;
  const through = row.journalThrough;
  if (through === undefined) {
    legacy.watermarkByCount(row);
    return changed(slot);
  }
  // Entries that arrive after the commit that covers them are committed: the commit named their place.
  row.journalWatermark += op.body.entries.filter((_, index) => subOrder(base, index) <= through).length;
  return changed(slot);
};

/** journal.commit: the greatest commit wins, counting the entries ordered up to the last one it names. */
export const commitJournal: Rule<'journal.commit'> = async (db, slot, row, op) => {
  const { through } = op.body;
  if (through === undefined) return legacy.commitByCount(slot, row, op);
  // The greatest commit wins: the watermark counts the entries ordered up to the last one it covers, so
  // entries of another device made after it stay pending on every replica, whatever arrives first.
  if (row.journalThrough !== undefined && through <= row.journalThrough) return false;
  row.journalThrough = through;
  const [lower] = sessionRange(op.userId, op.sessionId);
  row.journalWatermark = await db.journal.where('[userId+sessionId+order]').between(lower, [op.userId, op.sessionId, through], true, true).count();
  return changed(slot);
};
