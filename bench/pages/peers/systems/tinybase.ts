/**
 * TinyBase 10 with its IndexedDB persister: one store (and database) per
 * chat, a table of messages; `save()` awaited after each write so the
 * promise means stored; other tabs see writes by polling (`startAutoLoad`).
 */
import { createStore, type Store } from 'tinybase';
import { createIndexedDbPersister, type IndexedDbPersister } from 'tinybase/persisters/persister-indexed-db';
import { benchMessage, type PeerInstance, type PeerSystem } from '../types.js';

interface Chat {
  store: Store;
  persister: IndexedDbPersister;
}

const rowOf = (chat: string, i: number) => ({ sessionId: chat, order: i, ...benchMessage(i), createdAt: Date.now() });

async function open(name: string): Promise<PeerInstance> {
  const chats = new Map<string, Chat>();
  const chatOf = async (chat: string): Promise<Chat> => {
    let found = chats.get(chat);
    if (!found) {
      const store = createStore();
      const persister = createIndexedDbPersister(store, `${name}-${chat}`);
      await persister.load();
      chats.set(chat, (found = { store, persister }));
    }
    return found;
  };
  return {
    async bulk(chat, from, count) {
      const { store, persister } = await chatOf(chat);
      store.transaction(() => {
        for (let k = 0; k < count; k++) store.setRow('messages', String(from + k), rowOf(chat, from + k));
      });
      await persister.save();
    },
    async append(chat, i) {
      const { store, persister } = await chatOf(chat);
      store.setRow('messages', String(i), rowOf(chat, i));
      await persister.save();
    },
    async last(chat, count) {
      const { store } = await chatOf(chat);
      const ids = store.getSortedRowIds('messages', 'order', true, 0, count).reverse();
      return ids.map((id) => store.getRow('messages', id)).length;
    },
    async watch(chat, onChange) {
      const { store, persister } = await chatOf(chat);
      await persister.startAutoLoad();
      const id = store.addRowIdsListener('messages', () => onChange());
      return () => {
        store.delListener(id);
        void persister.stopAutoLoad();
      };
    },
    async close() {
      for (const { persister } of chats.values()) await persister.destroy();
      chats.clear();
    },
  };
}

export const system: PeerSystem = { name: 'tinybase', open };
