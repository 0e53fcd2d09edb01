/**
 * RxDB 17.6 on its Dexie storage, one collection with an index on
 * [sessionId, order]; multiInstance (BroadcastChannel) for the other tabs.
 */
import { createRxDatabase, type RxCollection, type RxDatabase, type RxJsonSchema } from 'rxdb';
import { getRxStorageDexie } from 'rxdb/plugins/storage-dexie';
import { benchMessage, type PeerInstance, type PeerSystem } from '../types.js';

interface Row {
  id: string;
  sessionId: string;
  order: number;
  role: string;
  content: string;
  createdAt: number;
}

const schema: RxJsonSchema<Row> = {
  version: 0,
  primaryKey: 'id',
  type: 'object',
  properties: {
    id: { type: 'string', maxLength: 128 },
    sessionId: { type: 'string', maxLength: 128 },
    order: { type: 'number', minimum: 0, maximum: 1e12, multipleOf: 1 },
    role: { type: 'string' },
    content: { type: 'string' },
    createdAt: { type: 'number' },
  },
  required: ['id', 'sessionId', 'order', 'role', 'content', 'createdAt'],
  indexes: [['sessionId', 'order']],
};

const rowOf = (chat: string, i: number): Row => ({ id: `${chat}:${i}`, sessionId: chat, order: i, ...benchMessage(i), createdAt: Date.now() });

async function open(name: string): Promise<PeerInstance> {
  const db: RxDatabase = await createRxDatabase({ name, storage: getRxStorageDexie(), multiInstance: true, closeDuplicates: true });
  const collections = await db.addCollections<{ messages: RxCollection<Row> }>({ messages: { schema } });
  const messages = collections.messages;
  return {
    async bulk(chat, from, count) {
      const result = await messages.bulkInsert(Array.from({ length: count }, (_, k) => rowOf(chat, from + k)));
      if (result.error.length > 0) throw new Error(`rxdb bulkInsert: ${result.error.length} errors`);
    },
    async append(chat, i) {
      await messages.insert(rowOf(chat, i));
    },
    async last(chat, count) {
      const docs = await messages.find({ selector: { sessionId: chat }, sort: [{ order: 'desc' }], limit: count }).exec();
      return docs.reverse().length;
    },
    async watch(chat, onChange) {
      const subscription = messages.insert$.subscribe((event) => {
        if ((event.documentData as Row).sessionId === chat) onChange();
      });
      return () => subscription.unsubscribe();
    },
    async close() {
      await db.close();
    },
  };
}

export const system: PeerSystem = { name: 'rxdb', open };
