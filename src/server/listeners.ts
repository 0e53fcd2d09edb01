/**
 * Poke listeners of one store, by user. A listener that throws is reported
 * and does not stop the others or the push that caused the poke.
 */
import type { StorePokeItems } from './store.js';

type OnPoke = (head: number, appended?: StorePokeItems) => void;

export class PokeListeners {
  readonly #byUser = new Map<string, Set<OnPoke>>();

  /** Adds a listener; returns its removal. */
  add(userId: string, onPoke: OnPoke): () => void {
    let set = this.#byUser.get(userId);
    if (!set) this.#byUser.set(userId, (set = new Set()));
    set.add(onPoke);
    return () => {
      set.delete(onPoke);
      if (set.size === 0 && this.#byUser.get(userId) === set) this.#byUser.delete(userId);
    };
  }

  /** True when `userId` has a listener here (a poke's items are worth reading only then). */
  has(userId: string): boolean {
    return this.#byUser.has(userId);
  }

  /** Calls every listener of `userId` with `head` and the items the push appended, when known. */
  poke(userId: string, head: number, appended?: StorePokeItems): void {
    for (const onPoke of [...(this.#byUser.get(userId) ?? [])]) {
      try {
        if (appended) onPoke(head, appended);
        else onPoke(head);
      } catch (error) {
        console.error('tabula-server: a poke listener threw', error);
      }
    }
  }

  /** The users that have a listener here. */
  users(): string[] {
    return [...this.#byUser.keys()];
  }

  clear(): void {
    this.#byUser.clear();
  }
}
