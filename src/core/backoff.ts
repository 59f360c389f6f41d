/**
 * Exponential backoff with full jitter, as flannel's watch loop (100 ms doubling to 5 s).
 * Pure: the random source is injected so tests can pin it.
 */
export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  random?: () => number;
}

export class Backoff {
  readonly #initial: number;
  readonly #max: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.#initial = options.initialMs ?? 100;
    this.#max = options.maxMs ?? 5000;
    this.#random = options.random ?? Math.random;
  }

  /** The next wait: grows by 2 each call up to the cap, jittered to 50-100% of its value. */
  next(): number {
    const ceiling = Math.min(this.#max, this.#initial * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return Math.round(ceiling / 2 + (ceiling / 2) * this.#random());
  }

  reset(): void {
    this.#attempt = 0;
  }
}
