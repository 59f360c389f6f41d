import { abortReason } from './abort.js';

/**
 * An unbounded single-consumer queue: producers push, one consumer awaits `next`. Used to merge
 * several event sources into one loop without EventEmitter plumbing.
 */
export class AsyncQueue<T> {
  readonly #items: T[] = [];
  #waiter: ((value: T) => void) | undefined;

  push(item: T): void {
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter(item);
    } else {
      this.#items.push(item);
    }
  }

  /** The next item, or the abort reason when `signal` fires first. */
  next(signal: AbortSignal): Promise<T> {
    if (this.#items.length > 0) return Promise.resolve(this.#items.shift() as T);
    if (signal.aborted) return Promise.reject(abortReason(signal));
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiter = undefined;
        reject(abortReason(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiter = (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      };
    });
  }
}
