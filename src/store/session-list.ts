/**
 * `tabula.sessions()`: the sessions of one user, newest (last changed)
 * first, as frozen {@link SessionInfo} summaries read off their session
 * rows (each row checked: a corrupt one fails the listing, naming it).
 */
import { mapStorageError } from './errors.js';
import { checkRow } from './db/rows.js';
import { type TabulaDb } from './db/schema.js';
import type { SessionInfo } from './types.js';

/** The sessions of `userId`, newest first. */
export async function listSessions(db: TabulaDb, userId: string): Promise<SessionInfo[]> {
  let rows;
  try {
    rows = await db.sessions
      .where('[userId+updatedAt]')
      .between([userId, -Infinity], [userId, Infinity], true, true)
      .reverse()
      .toArray();
  } catch (error) {
    throw mapStorageError(error, `list the sessions of user "${userId}"`);
  }
  return rows.map((row) => {
    checkRow('sessions', [row.userId, row.sessionId], row);
    return Object.freeze({
      userId: row.userId,
      sessionId: row.sessionId,
      version: row.version,
      messageCount: row.messageCount,
      summary: row.state.summary,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
      forkOf: row.forkOf,
    });
  });
}
