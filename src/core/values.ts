/**
 * An async source's values taken one at a time, so that none is kept once it is handled.
 *
 * `for await` keeps the last value it took in its frame (one of V8's registers, even after the
 * loop variable is set to something else) for as long as it waits for the next. A lease watch's
 * consumers wait for as long as the cluster is quiet, and the first batch they took is every peer:
 * held that way, it stayed in the heap for good (0.4 MB at 5000 peers, docs/benchmarks.md). Here a
 * value lives in the frame of a call that returns once the value is handled.
 */
export class Values<T extends object> {
  readonly #it: AsyncIterator<T>;
  /** A pull begun by ask() that next() or each() has not taken yet. */
  #asked: Promise<IteratorResult<T>> | undefined;

  constructor(source: AsyncIterable<T>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  /** The next value, or undefined at the source's end. */
  async next(): Promise<T | undefined> {
    const r = await this.#pull();
    return r.done ? undefined : r.value;
  }

  /** Hands every remaining value to `handle`, one after the other; returns at the source's end. */
  async each(handle: (value: T) => Promise<void> | void): Promise<void> {
    while (await this.#step(handle));
  }

  /**
   * Asks the source for its next value now, for next() or each() to take. A generator keeps what
   * it yielded last until it is resumed: asked before a collection, the sources up the chain let
   * go of the value they gave last, and the collection takes it.
   */
  ask(): void {
    if (this.#asked) return;
    this.#asked = this.#it.next();
    // Taken by the next next() or each(); a failure reaches the caller there, not as unhandled.
    this.#asked.catch(() => undefined);
  }

  async #step(handle: (value: T) => Promise<void> | void): Promise<boolean> {
    const r = await this.#pull();
    if (r.done) return false;
    await handle(r.value);
    return true;
  }

  #pull(): Promise<IteratorResult<T>> {
    const asked = this.#asked;
    this.#asked = undefined;
    return asked ?? this.#it.next();
  }

  /** Ends the source, as `for await` does when its loop is left early (an async generator's `finally` runs). */
  async close(): Promise<void> {
    await this.#it.return?.();
  }
}
