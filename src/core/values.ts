/**
 * An async source's values taken one at a time, so that none is kept once it is handled.
 *
 * `for await` keeps the last value it took in its frame (one of V8's registers, even after the
 * loop variable is set to something else) for as long as it waits for the next. A lease watch's
 * consumers wait for as long as the cluster is quiet, and the first batch they took is every peer:
 * held that way, it stayed in the heap for good (0.8 MB at 5000 peers, docs/benchmarks.md). Here a
 * value lives in the frame of a call that returns once the value is handled.
 */
export class Values<T extends object> {
  readonly #it: AsyncIterator<T>;

  constructor(source: AsyncIterable<T>) {
    this.#it = source[Symbol.asyncIterator]();
  }

  /** The next value, or undefined at the source's end. */
  async next(): Promise<T | undefined> {
    const r = await this.#it.next();
    return r.done ? undefined : r.value;
  }

  /** Hands every remaining value to `handle`, one after the other; returns at the source's end. */
  async each(handle: (value: T) => Promise<void> | void): Promise<void> {
    while (await this.#step(handle));
  }

  async #step(handle: (value: T) => Promise<void> | void): Promise<boolean> {
    const r = await this.#it.next();
    if (r.done) return false;
    await handle(r.value);
    return true;
  }

  /** Ends the source, as `for await` does when its loop is left early (an async generator's `finally` runs). */
  async close(): Promise<void> {
    await this.#it.return?.();
  }
}
