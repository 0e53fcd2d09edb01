/**
 * The session row's last-write-wins fields: the prefix (greatest order wins),
 * the state (greatest (version, order) wins, a replaced save not built on is
 * reported as a {@link SaveConflict}) and its summary (dropped by a clear or
 * restore ordered after the save that wrote it). The rules of `prefix.set`
 * and `state.save`, and the pieces a checkpoint restore and a clear share
 * with them; the restore's messages are checkpoints.ts's.
 */
import { plainEqual } from '../../core/json.js';
import type { StateFields } from '../../core/ops.js';
import type { SessionRow } from '../db/rows.js';
import * as legacy from './legacy.js';
import { changed, type Rule, type SessionSlot } from './slot.js';

/**
 * A state save (or restore) replaced by another one that was not built on it: `won` was made on a state
 * other than `lost` (a concurrent save on another replica, of any version). A save that carries its
 * `base` is built on the save whose order key that is (and one that stores the very state it replaces
 * loses nothing, so is not listed); an older one without `base` counts as built on any save of a lower
 * version (the rule before bases, which saw only saves of the same version). The sync client reports it
 * to the device that made `lost`.
 */
export interface SaveConflict {
  readonly userId: string;
  readonly sessionId: string;
  readonly lost: { readonly version: number; readonly order: string; readonly state: StateFields };
  readonly won: { readonly version: number; readonly order: string; readonly state: StateFields };
}

/** True when (version, order) a is greater than b. */
export function versionWins(version: number, order: string, row: SessionRow): boolean {
  return version > row.version || (version === row.version && order > (row.versionOrder ?? ''));
}

/**
 * The summary is the one the winning save carries (or, for a save without one, the one it kept) unless
 * a clear or restore ordered after the save that wrote it dropped it; `setOrder` is the order of that
 * save. A function of maxima, so every replica computes the same one.
 */
export function settleSummary(row: SessionRow, setOrder = row.summaryOrder): void {
  if (row.clearedBefore > setOrder) {
    if (row.state.summary !== null) row.state = { ...row.state, summary: null };
    row.summaryOrder = row.clearedBefore;
  } else {
    row.summaryOrder = setOrder;
  }
}

/**
 * Makes the save (version, order) the session's winning state, reporting the save it replaces when it
 * was not built on that one (see {@link SaveConflict}): with a `base`, built on exactly the save whose
 * order key it names; without (older ops), on any save of a lower version.
 */
export function setVersion(
  slot: SessionSlot,
  row: SessionRow,
  save: { version: number; order: string; base: string | undefined },
  state: StateFields,
  setsSummary: boolean,
): void {
  const { version, order, base } = save;
  const current = row.versionOrder ?? '';
  // A save that names its base and stores the very state it replaces loses nothing (two imports of one history, say).
  const conflict = base === undefined ? legacy.conflictWithoutBase(version, row) : base !== current && !plainEqual(row.state, state);
  if (slot.conflicts && row.version > 0 && conflict) {
    slot.conflicts.push({
      userId: row.userId,
      sessionId: row.sessionId,
      lost: { version: row.version, order: current, state: row.state },
      won: { version, order, state },
    });
  }
  row.state = state;
  row.version = version;
  row.versionOrder = order;
  if (base === undefined) delete row.versionBase;
  else row.versionBase = base;
  settleSummary(row, setsSummary ? order : row.summaryOrder);
}

/** prefix.set: the greatest order wins. */
export const setPrefix: Rule<'prefix.set'> = (_db, slot, row, op) => {
  if (op.order <= row.prefixOrder) return false;
  row.prefix = op.body.prefix;
  row.prefixOrder = op.order;
  return changed(slot);
};

/** state.save: the greatest (version, order) wins (see {@link setVersion}). */
export const saveState: Rule<'state.save'> = (_db, slot, row, op) => {
  if (!versionWins(op.body.version, op.order, row)) return false;
  // Saves made by the store carry every field, so the winner's state does not depend on which
  // other saves this replica has seen; a partial patch (older data) merges as before.
  setVersion(slot, row, { version: op.body.version, order: op.order, base: op.body.base }, { ...row.state, ...op.body.patch }, 'summary' in op.body.patch);
  return changed(slot);
};
