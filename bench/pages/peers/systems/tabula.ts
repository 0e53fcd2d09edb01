/**
 * Tabula in the peers benchmark: the public API as an application uses it.
 * Bulk = `importSession` of an export holding the messages; the second
 * bulk path is one `append(batch)`. `tabulaSystem` also drives an earlier
 * Tabula (another checkout's src, PEERS_BASELINE_SRC) through the same code.
 */
import { openTabula, type Session, type SessionExport, type Tabula } from '../../../../src/index.js';
import { benchMessage, type PeerInstance, type PeerSystem } from '../types.js';

const BASE_TIME = 1_700_000_000_000;

function exportOf(template: SessionExport, chat: string, from: number, count: number): SessionExport {
  return {
    ...template,
    sessionId: chat,
    messages: Array.from({ length: count }, (_, k) => {
      const i = from + k;
      return {
        id: `m${i}`,
        order: `${String(BASE_TIME + i).padStart(15, '0')}.000000.bench`,
        createdAt: BASE_TIME + i,
        status: 'complete' as const,
        message: benchMessage(i),
      };
    }),
  };
}

/** Opens Tabula databases with `open` (this checkout's openTabula, or a baseline's). */
export function tabulaSystem(name: string, openWith: (options: { name: string }) => Promise<Tabula>): PeerSystem {
  return { name, open: (db) => open(openWith, db) };
}

async function open(openWith: (options: { name: string }) => Promise<Tabula>, db: string): Promise<PeerInstance> {
  const tabula: Tabula = await openWith({ name: db });
  const sessions = new Map<string, Session>();
  const session = async (chat: string) => {
    let found = sessions.get(chat);
    if (!found) sessions.set(chat, (found = await tabula.session(chat)));
    return found;
  };
  let template: SessionExport | null = null;
  return {
    async bulk(chat, from, count) {
      template ??= await (await session('template')).export();
      sessions.set(chat, await tabula.importSession(exportOf(template, chat, from, count)));
    },
    async bulkAppend(chat, from, count) {
      await (await session(chat)).append(Array.from({ length: count }, (_, k) => benchMessage(from + k)));
    },
    async append(chat, i) {
      await (await session(chat)).append(benchMessage(i));
    },
    async last(chat, count) {
      return (await (await session(chat)).messages({ last: count })).length;
    },
    async watch(chat, onChange) {
      return (await session(chat)).subscribe((change) => {
        if (change.kinds.includes('message.append')) onChange();
      });
    },
    close: () => tabula.close(),
  };
}

export const system: PeerSystem = tabulaSystem('tabula', openTabula);
