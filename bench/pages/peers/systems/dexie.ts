/**
 * Raw Dexie, the floor: one table indexed on [sessionId+order], `add` per
 * message, `bulkAdd` for bulk, and a BroadcastChannel message after each
 * committed add for the other tabs.
 */
import { Dexie, type EntityTable } from 'dexie';
import { benchMessage, type PeerInstance, type PeerSystem } from '../types.js';

interface Row {
  id: string;
  sessionId: string;
  order: number;
  role: string;
  content: string;
  createdAt: number;
}

const rowOf = (chat: string, i: number): Row => ({ id: `${chat}:${i}`, sessionId: chat, order: i, ...benchMessage(i), createdAt: Date.now() });

async function open(name: string): Promise<PeerInstance> {
  const db = new Dexie(name) as Dexie & { messages: EntityTable<Row, 'id'> };
  db.version(1).stores({ messages: 'id, [sessionId+order]' });
  await db.open();
  const channel = new BroadcastChannel(`${name}:changes`);
  return {
    async bulk(chat, from, count) {
      await db.messages.bulkAdd(Array.from({ length: count }, (_, k) => rowOf(chat, from + k)));
    },
    async append(chat, i) {
      await db.messages.add(rowOf(chat, i));
      channel.postMessage(chat);
    },
    async last(chat, count) {
      const rows = await db.messages.where('[sessionId+order]').between([chat, Dexie.minKey], [chat, Dexie.maxKey]).reverse().limit(count).toArray();
      return rows.reverse().length;
    },
    async watch(chat, onChange) {
      const listener = (event: MessageEvent) => {
        if (event.data === chat) onChange();
      };
      channel.addEventListener('message', listener);
      return () => channel.removeEventListener('message', listener);
    },
    async close() {
      channel.close();
      db.close();
    },
  };
}

export const system: PeerSystem = { name: 'dexie', open };
