/**
 * Poke listeners of one store, by user. A listener that throws is reported
 * and does not stop the others or the push that caused the poke.
 */
export class PokeListeners {
  readonly #byUser = new Map<string, Set<(head: number) => void>>();

  /** Adds a listener; returns its removal. */
  add(userId: string, onPoke: (head: number) => void): () => void {
    let set = this.#byUser.get(userId);
    if (!set) this.#byUser.set(userId, (set = new Set()));
    set.add(onPoke);
    return () => {
      set.delete(onPoke);
      if (set.size === 0 && this.#byUser.get(userId) === set) this.#byUser.delete(userId);
    };
  }

  /** Calls every listener of `userId` with `head`. */
  poke(userId: string, head: number): void {
    for (const onPoke of [...(this.#byUser.get(userId) ?? [])]) {
      try {
        onPoke(head);
      } catch (error) {
        console.error('tabula-server: a poke listener threw', error);
      }
    }
  }

  /** Calls every listener of every user (after a lost notification channel, so clients pull). */
  pokeAll(headOf: (userId: string) => number): void {
    for (const userId of [...this.#byUser.keys()]) this.poke(userId, headOf(userId));
  }

  clear(): void {
    this.#byUser.clear();
  }
}
